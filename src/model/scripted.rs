//! The scripted model: the built-in, deterministic [`Model`] driven by a JSON script (tests,
//! demos, load benchmarks). This file owns the script format (serde types, parsing with
//! path-naming error messages, load-time validation) and the [`Model`] impl (info, which turns a
//! session plays). One session's play of its turns is `scripted/session.rs`; the
//! `{{output:K:REGEX}}` placeholders are `scripted/placeholder.rs`.
//!
//! It must not know about actors, tools, approvals or traces, and it never panics on a script:
//! a bad script is a load error, anything unresolvable at run time is a `tracing::warn!`.

mod placeholder;
mod session;

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use self::session::{ScriptedSession, TurnSource};
use super::error::ModelSetupError;
pub use super::script_error::{PlaceholderError, ScriptError};
use super::{Model, ModelInfo, ModelSession, ModelSessionContext};
use crate::message::{StopReason, json_kind};

/// The text answered once a session has used up its turns.
pub const SCRIPT_FINISHED: &str = "script finished";

/// A script: the root session's turns and the subagents' scripts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// The root session's turns, played in order.
    #[serde(default)]
    pub turns: Vec<Turn>,
    /// The scripts of subagents, matched by their prompt.
    #[serde(default)]
    pub children: Vec<ChildScript>,
}

/// The turns of a subagent whose prompt contains `when_prompt_contains` (first match wins).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChildScript {
    /// A text the subagent's prompt must contain to play these turns.
    pub when_prompt_contains: String,
    /// The subagent's turns, played in order.
    #[serde(default)]
    pub turns: Vec<Turn>,
}

/// One model answer (used `repeat` times).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// Thinking streamed before the text.
    #[serde(default)]
    pub thinking: Option<String>,
    /// The assistant text of the answer.
    #[serde(default)]
    pub text: Option<String>,
    /// Tool calls of the answer, in order.
    #[serde(default)]
    pub tool_calls: Vec<ScriptedToolCall>,
    /// Delay before the answer streams, in milliseconds.
    #[serde(default)]
    pub delay_ms: u64,
    /// Ends the request with this failure instead of an answer.
    #[serde(default)]
    pub error: Option<ScriptedError>,
    /// Token use to report (default: an estimate of 4 chars per token).
    #[serde(default)]
    pub usage: Option<ScriptedUsage>,
    /// How many requests this turn answers (default 1, at least 1).
    #[serde(default = "one")]
    pub repeat: u32,
}

fn one() -> u32 {
    1
}

impl Default for Turn {
    fn default() -> Self {
        Turn {
            thinking: None,
            text: None,
            tool_calls: Vec::new(),
            delay_ms: 0,
            error: None,
            usage: None,
            repeat: 1,
        }
    }
}

/// A tool call of a turn. `arguments` is an object (sent as its compact JSON text) or a string
/// (sent verbatim); missing means `{}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedToolCall {
    /// The tool's name (must not be empty).
    pub name: String,
    /// An object (sent as compact JSON) or a string (sent verbatim); may hold
    /// `{{output:K:REGEX}}` placeholders.
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// The failure a turn's request ends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScriptedError {
    /// Ends the request `failed`.
    Failed,
    /// Ends the request `timeout`.
    Timeout,
    /// Ends the request `malformed`.
    Malformed,
    /// Ends the request `auth` (never retried).
    Auth,
}

impl ScriptedError {
    /// The `request_end` status this failure gives.
    pub fn status(self) -> StopReason {
        match self {
            ScriptedError::Failed => StopReason::Failed,
            ScriptedError::Timeout => StopReason::Timeout,
            ScriptedError::Malformed => StopReason::Malformed,
            ScriptedError::Auth => StopReason::Auth,
        }
    }
}

/// Token use reported for a turn (instead of the estimate).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedUsage {
    /// Input tokens to report.
    #[serde(default)]
    pub input: u64,
    /// Output tokens to report.
    #[serde(default)]
    pub output: u64,
}

impl Script {
    /// Parses and validates a script. Errors name the place (`turns[2]`, `children[0].turns[1]
    /// .tool_calls[0]`) and the problem.
    pub fn from_json_str(text: &str) -> Result<Script, ScriptError> {
        let value: Value = serde_json::from_str(text).map_err(ScriptError::Json)?;
        check_shapes(&value)?;
        let script =
            serde_json::from_str::<Script>(text).map_err(|source| ScriptError::Format {
                path: locate(&value),
                source,
            })?;
        script.validate()?;
        Ok(script)
    }

    /// Checks what serde cannot: `repeat ≥ 1`, argument types and placeholders.
    pub fn validate(&self) -> Result<(), ScriptError> {
        validate_turns(&self.turns, "turns")?;
        for (i, child) in self.children.iter().enumerate() {
            validate_turns(&child.turns, &format!("children[{i}].turns"))?;
        }
        Ok(())
    }
}

fn validate_turns(turns: &[Turn], path: &str) -> Result<(), ScriptError> {
    for (i, turn) in turns.iter().enumerate() {
        if turn.repeat == 0 {
            return Err(ScriptError::ZeroRepeat {
                at: format!("{path}[{i}]"),
            });
        }
        for (j, call) in turn.tool_calls.iter().enumerate() {
            let at = format!("{path}[{i}].tool_calls[{j}]");
            if call.name.is_empty() {
                return Err(ScriptError::EmptyToolName { at });
            }
            match &call.arguments {
                Value::Object(_) | Value::String(_) => {}
                other => {
                    return Err(ScriptError::ArgumentsKind {
                        at,
                        kind: json_kind(other),
                    });
                }
            }
            validate_strings(&call.arguments)
                .map_err(|source| ScriptError::Placeholder { at, source })?;
        }
    }
    Ok(())
}

fn validate_strings(value: &Value) -> Result<(), PlaceholderError> {
    match value {
        Value::String(s) => placeholder::validate(s),
        Value::Array(items) => items.iter().try_for_each(validate_strings),
        Value::Object(map) => map.values().try_for_each(validate_strings),
        _ => Ok(()),
    }
}

/// Serde would accept a JSON array for a struct: require an object wherever the format has one.
fn check_shapes(value: &Value) -> Result<(), ScriptError> {
    let map = expect_object(value, "the script")?;
    if let Some(turns) = map.get("turns") {
        check_turns(turns, "turns")?;
    }
    if let Some(Value::Array(children)) = map.get("children") {
        for (i, child) in children.iter().enumerate() {
            let at = format!("children[{i}]");
            if let Some(turns) = expect_object(child, &at)?.get("turns") {
                check_turns(turns, &format!("{at}.turns"))?;
            }
        }
    }
    Ok(())
}

fn check_turns(turns: &Value, path: &str) -> Result<(), ScriptError> {
    let Value::Array(turns) = turns else {
        return Ok(()); // serde names the wrong type, with its position
    };
    for (i, turn) in turns.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let turn = expect_object(turn, &at)?;
        if let Some(Value::Array(calls)) = turn.get("tool_calls") {
            for (j, call) in calls.iter().enumerate() {
                expect_object(call, &format!("{at}.tool_calls[{j}]"))?;
            }
        }
        if let Some(usage @ Value::Array(_)) = turn.get("usage") {
            expect_object(usage, &format!("{at}.usage"))?;
        }
    }
    Ok(())
}

fn expect_object<'a>(
    value: &'a Value,
    what: &str,
) -> Result<&'a serde_json::Map<String, Value>, ScriptError> {
    value.as_object().ok_or_else(|| ScriptError::NotAnObject {
        what: what.to_string(),
        kind: json_kind(value),
    })
}

/// Finds the innermost part of a script that fails to deserialize (for the error's path).
fn locate(value: &Value) -> Option<String> {
    let map = value.as_object()?;
    if let Some(path) = map
        .get("turns")
        .and_then(|turns| locate_turns(turns, "turns"))
    {
        return Some(path);
    }
    let children = map.get("children")?;
    let Some(children) = children.as_array() else {
        return Some("children".to_string());
    };
    for (i, child) in children.iter().enumerate() {
        let at = format!("children[{i}]");
        if serde_json::from_value::<ChildScript>(child.clone()).is_err() {
            let inner = child
                .get("turns")
                .and_then(|turns| locate_turns(turns, &format!("{at}.turns")));
            return Some(inner.unwrap_or(at));
        }
    }
    None
}

fn locate_turns(turns: &Value, path: &str) -> Option<String> {
    let Some(turns) = turns.as_array() else {
        return Some(path.to_string());
    };
    for (i, turn) in turns.iter().enumerate() {
        if serde_json::from_value::<Turn>(turn.clone()).is_ok() {
            continue;
        }
        let at = format!("{path}[{i}]");
        match turn.get("tool_calls") {
            Some(Value::Array(calls)) => {
                for (j, call) in calls.iter().enumerate() {
                    if serde_json::from_value::<ScriptedToolCall>(call.clone()).is_err() {
                        return Some(format!("{at}.tool_calls[{j}]"));
                    }
                }
            }
            Some(_) => return Some(format!("{at}.tool_calls")),
            None => {}
        }
        if let Some(usage) = turn.get("usage")
            && serde_json::from_value::<Option<ScriptedUsage>>(usage.clone()).is_err()
        {
            return Some(format!("{at}.usage"));
        }
        return Some(at);
    }
    None
}

/// The built-in scripted model; shared by all sessions of a host.
#[derive(Debug, Clone)]
pub struct ScriptedModel {
    script: Arc<Script>,
}

impl ScriptedModel {
    /// A model that plays `script`.
    pub fn new(script: Script) -> Self {
        ScriptedModel {
            script: Arc::new(script),
        }
    }

    /// A model that plays the script JSON `text`; errors say what does not parse and where.
    pub fn from_json_str(text: &str) -> Result<Self, ScriptError> {
        Script::from_json_str(text).map(Self::new)
    }

    /// A model that plays the script file at `path`; errors name the file.
    pub fn from_file(path: &Path) -> Result<Self, ModelSetupError> {
        let text = std::fs::read_to_string(path).map_err(|source| ModelSetupError::ReadScript {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json_str(&text).map_err(|source| ModelSetupError::InvalidScript {
            path: path.to_path_buf(),
            source: Box::new(source),
        })
    }

    /// The script played.
    pub fn script(&self) -> &Script {
        &self.script
    }
}

impl Model for ScriptedModel {
    fn info(&self) -> ModelInfo {
        ModelInfo {
            provider: "scripted".to_string(),
            model_id: "scripted".to_string(),
            context_window: Value::from(1_000_000u64),
        }
    }

    fn open(&self, ctx: &ModelSessionContext) -> Box<dyn ModelSession> {
        let source = if ctx.is_subagent {
            let prompt = ctx.first_prompt.as_deref().unwrap_or_default();
            match self
                .script
                .children
                .iter()
                .position(|c| prompt.contains(&c.when_prompt_contains))
            {
                Some(i) => TurnSource::Child(i),
                None => {
                    tracing::debug!(session = %ctx.session_id, "scripted model: no children entry matches the subagent prompt");
                    TurnSource::None
                }
            }
        } else {
            TurnSource::Root
        };
        let mut session =
            ScriptedSession::new(Arc::clone(&self.script), source, ctx.next_call_index);
        session.skip(ctx.requests_made);
        Box::new(session)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        Script::from_json_str(text).unwrap_err().to_string()
    }

    #[test]
    fn parses_the_documented_format() {
        let script = Script::from_json_str(
            r#"{ "turns": [
                { "thinking": "optional", "text": "optional text answer",
                  "tool_calls": [ { "name": "exec_command",
                                    "arguments": { "cmd": "echo hi", "description": "say hi" } } ],
                  "delay_ms": 0, "error": null, "usage": { "input": 10, "output": 5 }, "repeat": 1 },
                { "error": "auth", "repeat": 3, "tool_calls": [ { "name": "x", "arguments": "{bad" } ] } ],
              "children": [ { "when_prompt_contains": "lint", "turns": [ { "text": "linted" } ] } ] }"#,
        )
        .unwrap();
        assert_eq!(script.turns.len(), 2);
        assert_eq!(script.turns[0].thinking.as_deref(), Some("optional"));
        assert_eq!(
            script.turns[0].usage,
            Some(ScriptedUsage {
                input: 10,
                output: 5
            })
        );
        assert_eq!(script.turns[0].tool_calls[0].arguments["cmd"], "echo hi");
        assert_eq!(script.turns[1].error, Some(ScriptedError::Auth));
        assert_eq!(script.turns[1].repeat, 3);
        assert_eq!(script.turns[1].tool_calls[0].arguments, Value::from("{bad"));
        assert_eq!(script.children[0].when_prompt_contains, "lint");
        assert_eq!(script.children[0].turns[0].text.as_deref(), Some("linted"));
        // Defaults: everything is optional, nulls included.
        let empty = Script::from_json_str(
            r#"{"turns":[{"thinking":null,"text":null,"error":null,"usage":null}]}"#,
        )
        .unwrap();
        assert_eq!(empty.turns, vec![Turn::default()]);
        assert_eq!(Script::from_json_str("{}").unwrap(), Script::default());
        let call =
            Script::from_json_str(r#"{"turns":[{"tool_calls":[{"name":"list_commands"}]}]}"#)
                .unwrap();
        assert_eq!(call.turns[0].tool_calls[0].arguments, serde_json::json!({}));
    }

    #[test]
    fn unknown_fields_and_bad_values_name_the_place() {
        assert_eq!(
            err(r#"{"turns":[{"text":"a"},{"txt":"b"}]}"#),
            "turns[1]: unknown field `txt`, expected one of `thinking`, `text`, `tool_calls`, `delay_ms`, \
             `error`, `usage`, `repeat` at line 1 column 29"
        );
        assert_eq!(
            err(r#"{"turns":[{"error":"crash"}]}"#),
            "turns[0]: unknown variant `crash`, expected one of `failed`, `timeout`, `malformed`, `auth` \
             at line 1 column 26"
        );
        assert_eq!(
            err(r#"{"turns":[{"tool_calls":[{"name":"a"},{"name":"b","args":{}}]}]}"#),
            "turns[0].tool_calls[1]: unknown field `args`, expected `name` or `arguments` at line 1 column 56"
        );
        assert_eq!(
            err(r#"{"turns":[{"tool_calls":[{"arguments":{}}]}]}"#),
            "turns[0].tool_calls[0]: missing field `name` at line 1 column 41"
        );
        assert_eq!(
            err(r#"{"turns":[{"usage":{"input":1,"outptu":2}}]}"#),
            "turns[0].usage: unknown field `outptu`, expected `input` or `output` at line 1 column 38"
        );
        assert_eq!(
            err(r#"{"children":[{"turns":[]}]}"#),
            "children[0]: missing field `when_prompt_contains` at line 1 column 25"
        );
        assert_eq!(
            err("{\"children\":[{\"when_prompt_contains\":\"x\",\n\"turns\":[{\"repeat\":-1}]}]}"),
            "children[0].turns[0]: invalid value: integer `-1`, expected u32 at line 2 column 21"
        );
        assert_eq!(
            err(r#"{"turn":[]}"#),
            "unknown field `turn`, expected `turns` or `children` at line 1 column 7"
        );
        assert_eq!(
            err(r#"{"turns":{}}"#),
            "turns: invalid type: map, expected a sequence at line 1 column 9"
        );
        assert_eq!(
            err(r#"{"turns":[{"tool_calls":{}}]}"#),
            "turns[0].tool_calls: invalid type: map, expected a sequence at line 1 column 24"
        );
    }

    #[test]
    fn shapes_syntax_and_semantic_errors() {
        assert_eq!(
            err(r#"{"turns":[{"text":"a"}"#),
            "invalid JSON: EOF while parsing a list at line 1 column 22"
        );
        assert_eq!(
            err(r#"{"turns":[]} x"#),
            "invalid JSON: trailing characters at line 1 column 14"
        );
        assert_eq!(
            err("[]"),
            "the script: expected a JSON object, not an array"
        );
        assert_eq!(
            err(r#"{"turns":[["hi"]]}"#),
            "turns[0]: expected a JSON object, not an array"
        );
        assert_eq!(
            err(r#"{"turns":[{"usage":[1,2]}]}"#),
            "turns[0].usage: expected a JSON object, not an array"
        );
        assert_eq!(
            err(r#"{"children":[["x"]]}"#),
            "children[0]: expected a JSON object, not an array"
        );
        assert_eq!(
            err(r#"{"turns":[{"repeat":0}]}"#),
            "turns[0].repeat: must be at least 1"
        );
        assert_eq!(
            err(r#"{"turns":[{"tool_calls":[{"name":""}]}]}"#),
            "turns[0].tool_calls[0].name: must not be empty"
        );
        assert_eq!(
            err(r#"{"turns":[{"tool_calls":[{"name":"a","arguments":3}]}]}"#),
            "turns[0].tool_calls[0].arguments: must be a JSON object or a string, not a number"
        );
        assert_eq!(
            err(
                r#"{"children":[{"when_prompt_contains":"x","turns":[{"tool_calls":[{"name":"a","arguments":{"x":["{{output:0:a+}}"]}}]}]}]}"#
            ),
            "children[0].turns[0].tool_calls[0].arguments: placeholder regex \"a+\" has no capture group \
             (the value is the first group)"
        );
        assert_eq!(
            err(r#"{"turns":[{"tool_calls":[{"name":"a","arguments":"{{output:last:(a)}}"}]}]}"#),
            "turns[0].tool_calls[0].arguments: placeholder \"{{output:last:(a)}}\" has an invalid tool call \
             index \"last\" (expected an integer)"
        );
    }

    #[test]
    fn from_file_reads_and_reports_with_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.json");
        std::fs::write(&good, r#"{"turns":[{"text":"hi"}]}"#).unwrap();
        let model = ScriptedModel::from_file(&good).unwrap();
        assert_eq!(model.script().turns[0].text.as_deref(), Some("hi"));

        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, r#"{"turns":[{"error":"oops"}]}"#).unwrap();
        let e = ScriptedModel::from_file(&bad).unwrap_err();
        assert!(matches!(e, ModelSetupError::InvalidScript { .. }));
        assert_eq!(
            e.to_string(),
            format!(
                "invalid script {}: turns[0]: unknown variant `oops`, expected one of `failed`, `timeout`, \
                 `malformed`, `auth` at line 1 column 25",
                bad.display()
            )
        );

        let missing = dir.path().join("missing.json");
        let e = ScriptedModel::from_file(&missing).unwrap_err();
        assert!(matches!(e, ModelSetupError::ReadScript { .. }));
        assert_eq!(
            e.to_string(),
            format!(
                "cannot read {}: No such file or directory (os error 2)",
                missing.display()
            )
        );
    }

    #[test]
    fn info_names_the_scripted_model() {
        let model = ScriptedModel::new(Script::default());
        assert_eq!(
            model.info(),
            ModelInfo {
                provider: "scripted".to_string(),
                model_id: "scripted".to_string(),
                context_window: serde_json::json!(1000000),
            }
        );
        assert_eq!(
            serde_json::to_string(&model.info().context_window).unwrap(),
            "1000000"
        );
    }
}
