//! The hook protocol of Claude Code: the JSON object a hook reads on stdin, how its exit code
//! and stdout are read, and how the results of the hooks of one event combine
//! (deny > ask > allow, a block is a deny; the first `updatedInput` wins; every context is
//! kept; a `continue: false` stops).
//!
//! Pure: no processes here (see `runner`), no trace (the session records what this returns).

use serde_json::{Map, Value, json};

use super::claude_view;
use super::config::{HookEvent, HookView};
use crate::tools::definition::ClaudeCodeName;

/// What every hook of a session is told about the call.
#[derive(Debug, Clone)]
pub struct HookContext {
    /// The session's id.
    pub session_id: String,
    /// The session's trace.
    pub transcript_path: String,
    /// The workspace, where hooks run.
    pub cwd: String,
    /// Rookery's approval mode name (`allow-all`, …).
    pub permission_mode: String,
}

/// The call a hook runs for.
#[derive(Debug, Clone)]
pub struct HookCall {
    /// The call's id.
    pub tool_use_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The arguments JSON text as the model sent it.
    pub arguments: String,
    /// The tool's Claude Code name, from its definition.
    pub claude_code: Option<ClaudeCodeName>,
}

/// The PostToolUse part of the input.
#[derive(Debug, Clone)]
pub struct ToolResponse {
    /// The output text the model reads.
    pub output: String,
    /// How the call ended (`completed`, `failed`, …).
    pub stop_reason: String,
    /// How long the call took, in milliseconds.
    pub duration_ms: u64,
}

/// The call's arguments as JSON (arguments that are not JSON are passed as their text).
pub fn arguments_value(call: &HookCall) -> Value {
    serde_json::from_str::<Value>(&call.arguments)
        .unwrap_or_else(|_| Value::String(call.arguments.clone()))
}

/// The stdin object of a hook that sees the call in `view`. In Claude Code's view,
/// `tool_name` is the tool's Claude Code name (where it has one), `rookery_tool_name` Rookery's,
/// and `tool_input` / `tool_response` carry Claude Code's fields beside Rookery's.
pub fn input(
    ctx: &HookContext,
    event: HookEvent,
    call: &HookCall,
    response: Option<&ToolResponse>,
    view: HookView,
) -> Value {
    let mut tool_input = arguments_value(call);
    let mut tool_name = call.tool_name.as_str();
    let claude = match (view, &call.claude_code) {
        (HookView::ClaudeCode, Some(cc)) => {
            tool_input = claude_view::tool_input(cc, &tool_input);
            tool_name = cc.name;
            Some(cc)
        }
        _ => None,
    };
    let mut v = json!({
        "session_id": ctx.session_id,
        "transcript_path": ctx.transcript_path,
        "cwd": ctx.cwd,
        "permission_mode": ctx.permission_mode,
        "hook_event_name": event.as_str(),
        "tool_name": tool_name,
        "tool_input": tool_input,
        "tool_use_id": call.tool_use_id,
    });
    let Some(obj) = v.as_object_mut() else {
        return v;
    };
    if view == HookView::ClaudeCode {
        obj.insert("rookery_tool_name".into(), json!(call.tool_name));
    }
    if let Some(r) = response {
        let tool_response = match claude {
            Some(cc) => claude_view::tool_response(
                cc,
                obj.get("tool_input").unwrap_or(&Value::Null),
                &r.output,
                &r.stop_reason,
            ),
            None => json!({"output": r.output, "stop_reason": r.stop_reason}),
        };
        obj.insert("tool_response".into(), tool_response);
        obj.insert("duration_ms".into(), json!(r.duration_ms));
    }
    v
}

/// The stdin object of an event that is about no tool call (`UserPromptSubmit`, `Stop`,
/// `SessionStart`, …): the session's fields, `hook_event_name`, then the event's `fields`.
pub fn event_input(ctx: &HookContext, event: HookEvent, fields: Map<String, Value>) -> Value {
    let mut v = Map::new();
    v.insert("session_id".into(), json!(ctx.session_id));
    v.insert("transcript_path".into(), json!(ctx.transcript_path));
    v.insert("cwd".into(), json!(ctx.cwd));
    v.insert("permission_mode".into(), json!(ctx.permission_mode));
    v.insert("hook_event_name".into(), json!(event.as_str()));
    v.extend(fields);
    Value::Object(v)
}

/// How one hook process ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Exit {
    /// Exited with this code (`None`: killed by a signal).
    Code(Option<i32>),
    /// Passed its timeout and was killed with its process tree.
    TimedOut,
    /// Could not be started.
    Spawn(String),
}

/// One hook's run, as the runner saw it (stdout and stderr capped).
#[derive(Debug, Clone, PartialEq)]
pub struct RawRun {
    /// The hook's command line.
    pub command: String,
    /// How it ended.
    pub exit: Exit,
    /// What it wrote to stdout (capped).
    pub stdout: String,
    /// What it wrote to stderr (capped).
    pub stderr: String,
}

/// A decision of a hook: a PreToolUse's or a PermissionRequest's permission; for
/// `UserPromptSubmit`, `Stop` and `SubagentStop`, a block is `Deny`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Permission {
    /// Run the call without asking.
    Allow,
    /// Ask the approver.
    Ask,
    /// Refuse the call.
    Deny,
}

/// A hook that failed without blocking.
#[derive(Debug, Clone, PartialEq)]
pub struct HookFailure {
    /// The hook's command line.
    pub command: String,
    /// Its exit code; `None` when it timed out, was killed or never started.
    pub exit_code: Option<i32>,
    /// What it wrote to stderr, or why it failed.
    pub stderr: String,
}

/// The combined result of the hooks of one event.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Combined {
    /// The strongest decision (deny > ask > allow), `None` when no hook decided.
    pub decision: Option<Permission>,
    /// The command of the first hook that gave that decision.
    pub decided_by: Option<String>,
    /// A hook answered `continue: false`: its `stopReason` (empty when it gave none).
    pub stop: Option<String>,
    /// The reasons of the hooks that gave that decision, joined.
    pub reason: Option<String>,
    /// The first hook's `updatedInput` (a JSON object) and that hook's command.
    pub updated_input: Option<(String, Map<String, Value>)>,
    /// Which run (index in config order) gave `updated_input`.
    pub updated_by: Option<usize>,
    /// `additionalContext` texts (and PostToolUse `decision: block` reasons), in config order.
    pub context: Vec<String>,
    /// Hooks that failed without blocking (each recorded as `hook_error`).
    pub failures: Vec<HookFailure>,
}

/// How many characters of a hook's stderr a `hook_error` keeps.
const STDERR_HEAD: usize = 2000;

fn head(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// Reads one run into `acc` (`event` decides what `decision`/`reason` mean).
fn read_one(
    event: HookEvent,
    index: usize,
    run: &RawRun,
    decisions: &mut Vec<(Permission, String, usize)>,
    acc: &mut Combined,
) {
    let failure = |exit_code: Option<i32>, stderr: String| HookFailure {
        command: run.command.clone(),
        exit_code,
        stderr: head(&stderr, STDERR_HEAD),
    };
    match &run.exit {
        Exit::TimedOut => acc.failures.push(failure(
            None,
            format!("hook timed out and was killed; {}", run.stderr),
        )),
        Exit::Spawn(e) => acc
            .failures
            .push(failure(None, format!("cannot start hook: {e}"))),
        Exit::Code(Some(2)) => {
            let reason = run.stderr.trim().to_string();
            match event {
                HookEvent::PreToolUse
                | HookEvent::UserPromptSubmit
                | HookEvent::Stop
                | HookEvent::SubagentStop
                | HookEvent::PermissionRequest => decisions.push((Permission::Deny, reason, index)),
                HookEvent::PostToolUse => {
                    if !reason.is_empty() {
                        acc.context.push(reason);
                    }
                }
                // Nothing to block: shown as a warning.
                HookEvent::SessionStart
                | HookEvent::SessionEnd
                | HookEvent::PreCompact
                | HookEvent::Notification => acc.failures.push(failure(Some(2), reason)),
            }
        }
        Exit::Code(Some(0)) => {
            let out = run.stdout.trim_start();
            if !out.starts_with('{') {
                // Plain text on stdout is context for these two, as in Claude Code.
                let text = out.trim_end();
                if matches!(event, HookEvent::UserPromptSubmit | HookEvent::SessionStart)
                    && !text.is_empty()
                {
                    acc.context.push(text.to_string());
                }
                return;
            }
            match serde_json::from_str::<Value>(out) {
                Ok(v) => read_json(event, index, run, &v, decisions, acc),
                Err(e) => acc.failures.push(failure(
                    Some(0),
                    format!("hook printed invalid JSON ({e}); {}", run.stderr),
                )),
            }
        }
        Exit::Code(code) => acc.failures.push(failure(*code, run.stderr.clone())),
    }
}

fn read_json(
    event: HookEvent,
    index: usize,
    run: &RawRun,
    v: &Value,
    decisions: &mut Vec<(Permission, String, usize)>,
    acc: &mut Combined,
) {
    let specific = v.get("hookSpecificOutput");
    let get_str = |obj: Option<&Value>, key: &str| {
        obj.and_then(|o| o.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let reason = get_str(specific, "permissionDecisionReason")
        .or_else(|| get_str(Some(v), "reason"))
        .unwrap_or_default();
    match event {
        HookEvent::PreToolUse => {
            let decision = match get_str(specific, "permissionDecision").as_deref() {
                Some("allow") => Some(Permission::Allow),
                Some("deny") => Some(Permission::Deny),
                Some("ask") => Some(Permission::Ask),
                _ => match get_str(Some(v), "decision").as_deref() {
                    // The older top-level form.
                    Some("approve") => Some(Permission::Allow),
                    Some("block") => Some(Permission::Deny),
                    Some("ask") => Some(Permission::Ask),
                    _ => None,
                },
            };
            if let Some(d) = decision {
                decisions.push((d, reason, index));
            }
            match specific.and_then(|s| s.get("updatedInput")) {
                Some(Value::Object(new)) if acc.updated_input.is_none() => {
                    acc.updated_input = Some((run.command.clone(), new.clone()));
                    acc.updated_by = Some(index);
                }
                None | Some(Value::Object(_) | Value::Null) => {}
                // Not arguments: ignored, and said so in the trace.
                Some(other) => acc.failures.push(HookFailure {
                    command: run.command.clone(),
                    exit_code: Some(0),
                    stderr: head(
                        &format!(
                            "hook's updatedInput must be a JSON object, got {}; ignored",
                            crate::message::json_kind(other)
                        ),
                        STDERR_HEAD,
                    ),
                }),
            }
        }
        HookEvent::PostToolUse => {
            if get_str(Some(v), "decision").as_deref() == Some("block") && !reason.is_empty() {
                acc.context.push(reason);
            }
        }
        HookEvent::UserPromptSubmit | HookEvent::Stop | HookEvent::SubagentStop => {
            if get_str(Some(v), "decision").as_deref() == Some("block") {
                decisions.push((Permission::Deny, reason, index));
            }
        }
        HookEvent::PermissionRequest => {
            let decision = specific.and_then(|s| s.get("decision"));
            let behavior = match get_str(decision, "behavior").as_deref() {
                Some("allow") => Some(Permission::Allow),
                Some("deny") => Some(Permission::Deny),
                _ => None,
            };
            if let Some(b) = behavior {
                decisions.push((b, get_str(decision, "message").unwrap_or_default(), index));
            }
        }
        HookEvent::SessionStart
        | HookEvent::SessionEnd
        | HookEvent::PreCompact
        | HookEvent::Notification => {}
    }
    if v.get("continue").and_then(Value::as_bool) == Some(false) && acc.stop.is_none() {
        acc.stop = Some(get_str(Some(v), "stopReason").unwrap_or_default());
    }
    if let Some(c) = get_str(specific, "additionalContext").filter(|c| !c.is_empty()) {
        acc.context.push(c);
    }
}

/// Combines the runs of one event's hooks (in config order).
pub fn combine(event: HookEvent, runs: &[RawRun]) -> Combined {
    let mut acc = Combined::default();
    let mut decisions = Vec::new();
    for (index, run) in runs.iter().enumerate() {
        read_one(event, index, run, &mut decisions, &mut acc);
    }
    if let Some(strongest) = decisions.iter().map(|(d, _, _)| *d).max() {
        let reasons: Vec<&str> = decisions
            .iter()
            .filter(|(d, r, _)| *d == strongest && !r.is_empty())
            .map(|(_, r, _)| r.as_str())
            .collect();
        acc.decided_by = decisions
            .iter()
            .find(|(d, _, _)| *d == strongest)
            .and_then(|(_, _, i)| runs.get(*i))
            .map(|r| r.command.clone());
        acc.decision = Some(strongest);
        acc.reason = (!reasons.is_empty()).then(|| reasons.join("; "));
    }
    if acc.decision == Some(Permission::Deny) {
        acc.updated_input = None;
        acc.updated_by = None;
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(code: i32, stdout: &str, stderr: &str) -> RawRun {
        RawRun {
            command: format!("hook{code}"),
            exit: Exit::Code(Some(code)),
            stdout: stdout.into(),
            stderr: stderr.into(),
        }
    }

    #[test]
    fn deny_beats_ask_beats_allow() {
        let allow = run(
            0,
            r#"{"hookSpecificOutput": {"permissionDecision": "allow"}}"#,
            "",
        );
        let ask = run(
            0,
            r#"{"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "check"}}"#,
            "",
        );
        let deny = run(2, "", "no way\n");
        let c = combine(HookEvent::PreToolUse, &[allow.clone(), ask.clone(), deny]);
        assert_eq!(c.decision, Some(Permission::Deny));
        assert_eq!(c.reason.as_deref(), Some("no way"));
        let c = combine(HookEvent::PreToolUse, &[allow.clone(), ask]);
        assert_eq!(c.decision, Some(Permission::Ask));
        assert_eq!(c.reason.as_deref(), Some("check"));
        assert_eq!(
            combine(HookEvent::PreToolUse, &[allow]).decision,
            Some(Permission::Allow)
        );
    }

    #[test]
    fn updated_input_context_and_failures() {
        let rewrite = run(
            0,
            r#"{"hookSpecificOutput": {"updatedInput": {"cmd": "ls"}, "additionalContext": "note"}}"#,
            "",
        );
        let bad = run(0, "{not json", "");
        let plain = run(0, "just text", "");
        let other = run(1, "", "oops");
        let c = combine(HookEvent::PreToolUse, &[rewrite, bad, plain, other]);
        assert_eq!(c.decision, None);
        assert_eq!(
            c.updated_input.map(|(_, m)| Value::Object(m)),
            Some(json!({"cmd": "ls"}))
        );
        assert_eq!(c.context, ["note"]);
        assert_eq!(c.failures.len(), 2);
        assert_eq!(c.failures[0].exit_code, Some(0));
        assert!(c.failures[0].stderr.contains("invalid JSON"));
        assert_eq!(c.failures[1].exit_code, Some(1));
    }

    #[test]
    fn a_non_object_updated_input_is_a_failure_and_changes_nothing() {
        let text = run(
            0,
            r#"{"hookSpecificOutput": {"updatedInput": "rm -rf /"}}"#,
            "",
        );
        let null = run(0, r#"{"hookSpecificOutput": {"updatedInput": null}}"#, "");
        let c = combine(HookEvent::PreToolUse, &[text, null]);
        assert_eq!(c.updated_input, None);
        assert_eq!(c.failures.len(), 1, "{:?}", c.failures);
        assert_eq!(c.failures[0].exit_code, Some(0));
        assert!(
            c.failures[0]
                .stderr
                .contains("updatedInput must be a JSON object, got a string"),
            "{:?}",
            c.failures
        );
    }

    #[test]
    fn lifecycle_events_block_continue_and_add_context() {
        let c = combine(HookEvent::UserPromptSubmit, &[run(2, "", "no secrets\n")]);
        assert_eq!(c.decision, Some(Permission::Deny));
        assert_eq!(c.reason.as_deref(), Some("no secrets"));
        assert_eq!(c.decided_by.as_deref(), Some("hook2"));
        let c = combine(
            HookEvent::UserPromptSubmit,
            &[run(0, "today is Monday\n", "")],
        );
        assert_eq!(
            (c.decision, c.context),
            (None, vec!["today is Monday".into()])
        );
        let c = combine(
            HookEvent::SessionStart,
            &[run(
                0,
                r#"{"hookSpecificOutput": {"additionalContext": "ctx"}}"#,
                "",
            )],
        );
        assert_eq!(c.context, ["ctx"]);
        let stop = r#"{"decision": "block", "reason": "tests fail"}"#;
        let c = combine(HookEvent::Stop, &[run(0, stop, "")]);
        assert_eq!(c.decision, Some(Permission::Deny));
        assert_eq!(c.reason.as_deref(), Some("tests fail"));
        let halt = r#"{"continue": false, "stopReason": "enough"}"#;
        let c = combine(HookEvent::Stop, &[run(0, halt, "")]);
        assert_eq!(c.stop.as_deref(), Some("enough"));
        let allow = r#"{"hookSpecificOutput": {"decision": {"behavior": "allow"}}}"#;
        let deny = r#"{"hookSpecificOutput": {"decision": {"behavior": "deny", "message": "no"}}}"#;
        let c = combine(HookEvent::PermissionRequest, &[run(0, allow, "")]);
        assert_eq!(c.decision, Some(Permission::Allow));
        let c = combine(
            HookEvent::PermissionRequest,
            &[run(0, allow, ""), run(0, deny, "")],
        );
        assert_eq!(
            (c.decision, c.reason.as_deref()),
            (Some(Permission::Deny), Some("no"))
        );
        // Nothing to block: an exit 2 is a warning.
        let c = combine(HookEvent::Notification, &[run(2, "", "x")]);
        assert_eq!((c.decision, c.failures.len()), (None, 1));
    }

    #[test]
    fn the_older_decision_ask_means_ask() {
        let ask = run(0, r#"{"decision": "ask", "reason": "look first"}"#, "");
        let c = combine(HookEvent::PreToolUse, &[ask]);
        assert_eq!(c.decision, Some(Permission::Ask));
        assert_eq!(c.reason.as_deref(), Some("look first"));
    }

    #[test]
    fn post_tool_use_block_reason_and_exit_2_become_context() {
        let block = run(0, r#"{"decision": "block", "reason": "tests failed"}"#, "");
        let two = run(2, "", "lint errors");
        let c = combine(HookEvent::PostToolUse, &[block, two]);
        assert_eq!(c.decision, None);
        assert_eq!(c.context, ["tests failed", "lint errors"]);
    }

    #[test]
    fn input_carries_the_protocol_fields() {
        let ctx = HookContext {
            session_id: "s".into(),
            transcript_path: "/t.jsonl".into(),
            cwd: "/w".into(),
            permission_mode: "allow-all".into(),
        };
        let call = HookCall {
            tool_use_id: "call_0".into(),
            tool_name: "exec_command".into(),
            arguments: r#"{"cmd":"ls"}"#.into(),
            claude_code: Some(ClaudeCodeName {
                name: "Bash",
                fields: &[("command", "cmd")],
            }),
        };
        let resp = ToolResponse {
            output: "x".into(),
            stop_reason: "completed".into(),
            duration_ms: 3,
        };
        let v = input(
            &ctx,
            HookEvent::PostToolUse,
            &call,
            Some(&resp),
            HookView::Rookery,
        );
        assert_eq!(v["tool_name"], "exec_command");
        assert!(v.get("rookery_tool_name").is_none());
        assert!(v["tool_input"].get("command").is_none());
        assert!(v["tool_response"].get("stdout").is_none());
        let cc = input(
            &ctx,
            HookEvent::PostToolUse,
            &call,
            Some(&resp),
            HookView::ClaudeCode,
        );
        assert_eq!(cc["tool_name"], "Bash");
        assert_eq!(cc["rookery_tool_name"], "exec_command");
        assert_eq!(cc["tool_input"]["command"], "ls");
        assert_eq!(cc["tool_input"]["cmd"], "ls");
        assert_eq!(cc["tool_response"]["stdout"], "x");
        assert_eq!(cc["tool_response"]["interrupted"], false);
        assert_eq!(v["tool_input"]["cmd"], "ls");
        assert_eq!(v["hook_event_name"], "PostToolUse");
        assert_eq!(v["tool_response"]["output"], "x");
        assert_eq!(v["duration_ms"], 3);
        assert_eq!(v["permission_mode"], "allow-all");
        assert_eq!(v["transcript_path"], "/t.jsonl");
    }
}
