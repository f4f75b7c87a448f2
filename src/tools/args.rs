//! Argument helpers shared by the builtin tools: required strings, lenient numbers and strict
//! booleans, each with the exact error text the model sees. No tool-specific rules live here.

use serde_json::{Map, Value};

/// `Missing required argument "<arg>" for <tool>.`
pub fn missing(arg: &str, tool: &str) -> String {
    MissingArg::new(arg, tool).to_string()
}

/// A required argument that is absent or not of its type; its text is the tool output the
/// model sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Missing required argument \"{arg}\" for {tool}.")]
pub struct MissingArg {
    /// The argument's name.
    pub arg: String,
    /// The tool's name.
    pub tool: String,
}

impl MissingArg {
    /// The error for the missing `arg` of `tool`.
    pub fn new(arg: &str, tool: &str) -> Self {
        MissingArg {
            arg: arg.to_string(),
            tool: tool.to_string(),
        }
    }
}

/// A required string argument, or the missing-argument text.
pub fn require_str<'a>(
    args: &'a Map<String, Value>,
    arg: &str,
    tool: &str,
) -> Result<&'a str, MissingArg> {
    match args.get(arg) {
        Some(Value::String(s)) => Ok(s.as_str()),
        _ => Err(MissingArg::new(arg, tool)),
    }
}

/// A required, non-empty string argument, or the missing-argument text.
pub fn require_nonempty_str<'a>(
    args: &'a Map<String, Value>,
    arg: &str,
    tool: &str,
) -> Result<&'a str, MissingArg> {
    match args.get(arg) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.as_str()),
        _ => Err(MissingArg::new(arg, tool)),
    }
}

/// A required, non-blank string argument, or the missing-argument text.
pub fn require_nonblank_str<'a>(
    args: &'a Map<String, Value>,
    arg: &str,
    tool: &str,
) -> Result<&'a str, MissingArg> {
    match args.get(arg) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.as_str()),
        _ => Err(MissingArg::new(arg, tool)),
    }
}

/// An optional string argument (`None` when absent or not a string).
pub fn opt_str<'a>(args: &'a Map<String, Value>, arg: &str) -> Option<&'a str> {
    args.get(arg).and_then(Value::as_str)
}

/// A boolean flag: counts only when the JSON value is literally `true`.
pub fn flag(args: &Map<String, Value>, arg: &str) -> bool {
    matches!(args.get(arg), Some(Value::Bool(true)))
}

/// A finite JSON number (numeric strings are not accepted), or `None`.
pub fn finite_number(args: &Map<String, Value>, arg: &str) -> Option<f64> {
    args.get(arg)
        .and_then(Value::as_f64)
        .filter(|n| n.is_finite())
}

/// A number or a numeric string, floored. `Ok(None)` when absent or null; `Err(())` when present
/// but not numeric.
#[allow(clippy::result_unit_err)]
pub fn lenient_integer(args: &Map<String, Value>, arg: &str) -> Result<Option<i64>, ()> {
    match args.get(arg) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|f| f.is_finite())
            .map(|f| Some(f.floor() as i64))
            .ok_or(()),
        Some(Value::String(s)) => s
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(|f| Some(f.floor() as i64))
            .ok_or(()),
        Some(_) => Err(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn missing_text_is_exact() {
        let a = obj(json!({}));
        assert_eq!(
            require_str(&a, "file_path", "read_file").map_err(|e| e.to_string()),
            Err("Missing required argument \"file_path\" for read_file.".to_string())
        );
    }

    #[test]
    fn lenient_numbers() {
        let a = obj(json!({"a": "12.7", "b": 3, "c": "x", "d": true}));
        assert_eq!(lenient_integer(&a, "a"), Ok(Some(12)));
        assert_eq!(lenient_integer(&a, "b"), Ok(Some(3)));
        assert_eq!(lenient_integer(&a, "c"), Err(()));
        assert_eq!(lenient_integer(&a, "d"), Err(()));
        assert_eq!(lenient_integer(&a, "zz"), Ok(None));
    }

    #[test]
    fn flags_need_literal_true() {
        let a = obj(json!({"x": "true", "y": true}));
        assert!(!flag(&a, "x"));
        assert!(flag(&a, "y"));
    }
}
