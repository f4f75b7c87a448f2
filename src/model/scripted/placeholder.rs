//! The `{{output:K:REGEX}}` placeholders of the scripted model's tool-call arguments: parsing,
//! load-time validation, expansion against the tool outputs of a request's history, and the
//! rendering of a turn's `arguments` (string verbatim, object as compact JSON) into the text sent.
//!
//! Syntax: `{{output:` then the index `K` (an integer, negative counts from the end) up to the
//! next `:`, then the regex up to the closing `}}`. The regex may contain `:` (only the first two
//! colons split) and `}` characters: the placeholder ends at the first run of two or more `}`, and
//! the last two braces of that run close it (so `{{output:0:(\d{2})}}` and `{{output:0:\d{2}}}`
//! both work; a regex cannot itself contain `}}` followed by a character other than `}`).
//!
//! This module must not do I/O or know about sessions; expansion never fails (a missing output,
//! no match or an invalid placeholder is logged with `tracing::warn!`).

use regex::Regex;
use serde_json::Value;

use crate::model::script_error::PlaceholderError;

const OPEN: &str = "{{output:";

/// One piece of an argument string.
#[derive(Debug, PartialEq)]
enum Segment<'a> {
    Literal(&'a str),
    Output { index: i64, regex: &'a str },
}

/// Splits `text` into literals and placeholders, or says what is wrong with a placeholder.
fn parse(text: &str) -> Result<Vec<Segment<'_>>, PlaceholderError> {
    let mut segments = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        if start > 0 {
            segments.push(Segment::Literal(&rest[..start]));
        }
        let body = &rest[start + OPEN.len()..];
        let Some(colon) = body.find(':') else {
            return Err(PlaceholderError::NoColon {
                placeholder: clip(&rest[start..]),
            });
        };
        let index_text = &body[..colon];
        let index: i64 = index_text.parse().map_err(|_| PlaceholderError::BadIndex {
            placeholder: clip(&rest[start..]),
            index: index_text.to_string(),
        })?;
        let after_index = &body[colon + 1..];
        let Some(close) = after_index.find("}}") else {
            return Err(PlaceholderError::Unclosed {
                placeholder: clip(&rest[start..]),
            });
        };
        // The last two braces of the first run of `}` close the placeholder.
        let mut end = close + 2;
        while after_index[end..].starts_with('}') {
            end += 1;
        }
        let regex = &after_index[..end - 2];
        segments.push(Segment::Output { index, regex });
        rest = &after_index[end..];
    }
    if !rest.is_empty() {
        segments.push(Segment::Literal(rest));
    }
    Ok(segments)
}

/// Shortens a piece of script text for an error message.
fn clip(text: &str) -> String {
    const MAX: usize = 60;
    if text.chars().count() <= MAX {
        text.to_string()
    } else {
        let head: String = text.chars().take(MAX).collect();
        format!("{head}…")
    }
}

/// The reason of a regex error on one line: the crate's `error: …` line (its other lines draw
/// the pattern and a caret), else the whole text joined.
fn regex_reason(e: &regex::Error) -> String {
    let text = e.to_string();
    match text
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("error: "))
    {
        Some(reason) => reason.to_string(),
        None => text.split_whitespace().collect::<Vec<_>>().join(" "),
    }
}

/// Compiles a placeholder regex and checks it has the capture group the value comes from.
fn compile(regex: &str) -> Result<Regex, PlaceholderError> {
    let compiled = Regex::new(regex).map_err(|source| PlaceholderError::InvalidRegex {
        regex: regex.to_string(),
        reason: regex_reason(&source),
        source,
    })?;
    if compiled.captures_len() < 2 {
        return Err(PlaceholderError::NoCaptureGroup {
            regex: regex.to_string(),
        });
    }
    Ok(compiled)
}

/// Checks every placeholder of `text` (syntax, index, regex) at load time.
pub(super) fn validate(text: &str) -> Result<(), PlaceholderError> {
    for segment in parse(text)? {
        if let Segment::Output { regex, .. } = segment {
            compile(regex)?;
        }
    }
    Ok(())
}

/// The output a placeholder index refers to: `0..` from the start, `-1` is the last one.
fn pick<'a>(outputs: &[&'a str], index: i64) -> Option<&'a str> {
    let len = i64::try_from(outputs.len()).ok()?;
    let at = if index < 0 { len + index } else { index };
    if at < 0 || at >= len {
        return None;
    }
    usize::try_from(at)
        .ok()
        .and_then(|i| outputs.get(i).copied())
}

/// Replaces every placeholder of `text` by the first capture group of its regex over the tool
/// output it names; anything that cannot be resolved becomes the empty string (with a warning).
pub(super) fn expand(text: &str, outputs: &[&str]) -> String {
    if !text.contains(OPEN) {
        return text.to_string();
    }
    let segments = match parse(text) {
        Ok(segments) => segments,
        Err(e) => {
            tracing::warn!("scripted model: {e}; argument sent verbatim");
            return text.to_string();
        }
    };
    let mut out = String::with_capacity(text.len());
    for segment in segments {
        match segment {
            Segment::Literal(literal) => out.push_str(literal),
            Segment::Output { index, regex } => out.push_str(&resolve(index, regex, outputs)),
        }
    }
    out
}

fn resolve(index: i64, regex: &str, outputs: &[&str]) -> String {
    let compiled = match compile(regex) {
        Ok(compiled) => compiled,
        Err(e) => {
            tracing::warn!("scripted model: {e}; replaced by the empty string");
            return String::new();
        }
    };
    let Some(output) = pick(outputs, index) else {
        tracing::warn!(
            "scripted model: no output of tool call {index} ({} outputs in the history) for \
             placeholder; replaced by the empty string",
            outputs.len()
        );
        return String::new();
    };
    match compiled.captures(output).and_then(|c| c.get(1)) {
        Some(group) => group.as_str().to_string(),
        None => {
            tracing::warn!(
                "scripted model: placeholder regex \"{regex}\" does not match the output of tool \
                 call {index}; replaced by the empty string"
            );
            String::new()
        }
    }
}

/// A string is expanded and sent verbatim; anything else is expanded string by string and sent
/// as compact JSON.
pub(super) fn render_arguments(arguments: &Value, outputs: &[&str]) -> String {
    match arguments {
        Value::String(s) => expand(s, outputs),
        other => expand_value(other, outputs).to_string(),
    }
}

fn expand_value(value: &Value, outputs: &[&str]) -> Value {
    match value {
        Value::String(s) => Value::String(expand(s, outputs)),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| expand_value(v, outputs)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), expand_value(v, outputs)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_splits_on_the_first_two_colons_and_the_last_braces_of_a_run() {
        assert_eq!(
            parse("a {{output:-2:x:(\\d{2})}} b {{output:0:y\\d{3}}}}c").unwrap(),
            vec![
                Segment::Literal("a "),
                Segment::Output {
                    index: -2,
                    regex: "x:(\\d{2})"
                },
                Segment::Literal(" b "),
                Segment::Output {
                    index: 0,
                    regex: "y\\d{3}}"
                },
                Segment::Literal("c"),
            ]
        );
        assert_eq!(
            parse("plain {{ text }}").unwrap(),
            vec![Segment::Literal("plain {{ text }}")]
        );
    }

    #[test]
    fn expand_positive_and_negative_indexes() {
        let outputs = ["pid=11 port:8080", "pid=22", "pid=33 time 12:34:56"];
        assert_eq!(expand("kill {{output:0:pid=(\\d+)}}", &outputs), "kill 11");
        assert_eq!(expand("{{output:1:pid=(\\d+)}}", &outputs), "22");
        assert_eq!(expand("{{output:-1:pid=(\\d+)}}", &outputs), "33");
        assert_eq!(expand("{{output:-3:pid=(\\d+)}}", &outputs), "11");
        // A regex containing ':' and a `{2}` counted repetition right before the closing braces.
        assert_eq!(
            expand("t={{output:-1:time (\\d{2}:\\d{2}):\\d{2}}}!", &outputs),
            "t=12:34!"
        );
        assert_eq!(
            expand("p={{output:0:port:(\\d{2})\\d{2}}}", &outputs),
            "p=80"
        );
    }

    #[test]
    fn expand_unresolvable_is_empty() {
        let outputs = ["one"];
        assert_eq!(expand("[{{output:1:(o)}}]", &outputs), "[]");
        assert_eq!(expand("[{{output:-2:(o)}}]", &outputs), "[]");
        assert_eq!(expand("[{{output:0:(x)}}]", &outputs), "[]");
        assert_eq!(expand("[{{output:0:(x)}}]", &[]), "[]");
        // Not validated (a script built with `new`): sent verbatim, never a panic.
        assert_eq!(
            expand("[{{output:zero:(x)}}]", &outputs),
            "[{{output:zero:(x)}}]"
        );
        assert_eq!(expand("[{{output:0:((}}]", &outputs), "[]");
    }

    #[test]
    fn render_arguments_expands_every_string() {
        let outputs = ["id=7"];
        let object = serde_json::json!({"a": "{{output:0:id=(\\d)}}", "b": [1, "x{{output:0:(id)}}"], "c": {"d": null}});
        assert_eq!(
            render_arguments(&object, &outputs),
            r#"{"a":"7","b":[1,"xid"],"c":{"d":null}}"#
        );
        assert_eq!(
            render_arguments(&Value::from("{\"a\": {{output:0:=(\\d)}}"), &outputs),
            "{\"a\": 7"
        );
    }

    #[test]
    fn validate_names_the_problem() {
        assert_eq!(validate("ok {{output:-1:a:(b)}}"), Ok(()));
        let validate = |text: &str| validate(text).map_err(|e| e.to_string());
        assert_eq!(
            validate("{{output:x:(a)}}"),
            Err("placeholder \"{{output:x:(a)}}\" has an invalid tool call index \"x\" (expected an integer)".to_string())
        );
        assert_eq!(
            validate("{{output:1}}"),
            Err("placeholder \"{{output:1}}\" has no ':' after the tool call index (expected {{output:K:REGEX}})".to_string())
        );
        assert_eq!(
            validate("{{output:1:(a)"),
            Err("placeholder \"{{output:1:(a)\" is not closed by \"}}\"".to_string())
        );
        assert_eq!(
            validate("{{output:1:a+}}"),
            Err(
                "placeholder regex \"a+\" has no capture group (the value is the first group)"
                    .to_string()
            )
        );
        let err = validate("{{output:1:(a}}").unwrap_err();
        assert!(
            err.starts_with("placeholder regex \"(a\" is invalid: "),
            "{err}"
        );
    }
}
