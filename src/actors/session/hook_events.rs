//! The session's side of the hook lifecycle: what every hook is told about the session
//! (`HookSite`), the records a hook run leaves in the trace (`hook_decision`, `hook_error`),
//! and the runs of the events about no tool call — `UserPromptSubmit` before a prompt reaches
//! the model, `Stop` / `SubagentStop` before a task ends, `SessionStart`, `SessionEnd` and
//! `PreCompact`.
//!
//! Hooks run in spawned tasks or in the actor's async start and close, never blocking a
//! turn's message; their answers come back as plain values (`hook_outcomes.rs` takes those of
//! the runs in the background). It must not write the conversation or drive the turn loop:
//! where the answers act (blocking a prompt, going on after a stop) is the callers' business
//! (`prompt_gate.rs`, `turn.rs`); the tool events are the gate's (`gate.rs`).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::SessionState;
use crate::hooks::{self, Combined, HookContext, HookEnv, HookEvent, HooksConfig, Permission};
use crate::message::{EventPayload, OmniMessage, Sender, build};

/// How long a `SessionEnd` hook may hold a closing session (its own timeout is cut to this).
const SESSION_END_BOUND: std::time::Duration = std::time::Duration::from_secs(10);

/// Everything a lifecycle hook needs, cloned out of the session into a spawned task.
#[derive(Clone)]
pub(crate) struct HookSite {
    /// The session's hooks.
    pub(crate) hooks: Arc<HooksConfig>,
    /// What each hook is told about the session.
    pub(crate) ctx: HookContext,
    /// Where and with what environment hooks run.
    pub(crate) env: HookEnv,
}

impl HookSite {
    /// The session's hook site (empty context when it has no hook: nobody reads it).
    pub(crate) fn of(state: &SessionState) -> HookSite {
        let options = &state.options;
        let hooks = options.config.hooks.clone();
        if hooks.is_empty() {
            return HookSite {
                hooks,
                ctx: HookContext {
                    session_id: String::new(),
                    transcript_path: String::new(),
                    cwd: String::new(),
                    permission_mode: String::new(),
                },
                env: HookEnv {
                    cwd: std::path::PathBuf::new(),
                    allow_env: None,
                    extra_env: Vec::new(),
                },
            };
        }
        let env_policy = state.env_policy();
        HookSite {
            hooks,
            ctx: HookContext {
                session_id: state.id.clone(),
                // Absolute, as Claude Code passes it: the hook runs in the workspace.
                transcript_path: state
                    .trace_health
                    .current()
                    .map(|p| std::path::absolute(&p).unwrap_or(p))
                    .unwrap_or_default()
                    .display()
                    .to_string(),
                cwd: options.workspace.display().to_string(),
                permission_mode: options.approver.mode_name().to_string(),
            },
            env: HookEnv {
                cwd: options.workspace.clone(),
                allow_env: Some(Arc::new(move |k, v| env_policy.allows(k, v))),
                extra_env: options.command_env.clone(),
            },
        }
    }

    /// Runs `event`'s hooks with `fields`; `subject` is what their matchers see.
    pub(crate) async fn run(
        &self,
        event: HookEvent,
        subject: &str,
        fields: Map<String, Value>,
    ) -> Option<Combined> {
        hooks::run_lifecycle(&self.hooks, event, subject, &self.ctx, &self.env, fields).await
    }
}

/// The `hook_error` records of the hooks that failed without blocking (each also a warning).
/// `event` is named for the events about no tool call.
pub(crate) fn failure_records(
    event: Option<HookEvent>,
    tool_call_id: &str,
    failures: &[hooks::protocol::HookFailure],
) -> Vec<OmniMessage> {
    failures
        .iter()
        .map(|f| {
            tracing::warn!(
                "hook `{}` failed (exit {:?}): {}",
                f.command,
                f.exit_code,
                f.stderr.lines().next().unwrap_or("")
            );
            OmniMessage::event(EventPayload::HookError {
                tool_call_id: tool_call_id.to_string(),
                event: event.map(|e| e.as_str().to_string()),
                command: f.command.clone(),
                exit_code: f.exit_code,
                stderr: f.stderr.clone(),
            })
        })
        .collect()
}

/// The `hook_decision` record of `combined` (`decision` names it), when a hook decided.
pub(crate) fn decision_record(
    event: HookEvent,
    combined: &Combined,
    decision: &str,
    tool_call_id: Option<&str>,
) -> OmniMessage {
    OmniMessage::event(EventPayload::HookDecision {
        event: event.as_str().to_string(),
        command: combined.decided_by.clone().unwrap_or_default(),
        decision: decision.to_string(),
        reason: combined.reason.clone().filter(|r| !r.is_empty()),
        tool_call_id: tool_call_id.map(str::to_string),
    })
}

/// The name a PreToolUse or PermissionRequest decision is recorded with.
pub(crate) fn permission_name(p: Permission) -> &'static str {
    match p {
        Permission::Allow => "allow",
        Permission::Ask => "ask",
        Permission::Deny => "deny",
    }
}

/// A hook's context for the model, as a harness-sent user text.
pub(crate) fn context_message(event: HookEvent, context: &[String]) -> Option<OmniMessage> {
    (!context.is_empty()).then(|| {
        build::user_text(
            format!(
                "[{} hook context]\n{}",
                event.as_str(),
                context.join("\n\n")
            ),
            Some(Sender::Harness),
        )
    })
}

/// What the `UserPromptSubmit` hooks made of a prompt.
pub(crate) enum PromptCheck {
    /// The prompt goes to the model, with this context after it.
    Pass {
        /// Context messages for the model (harness-sent user texts).
        context: Vec<OmniMessage>,
        /// Records to write first (`hook_error`).
        records: Vec<OmniMessage>,
    },
    /// The prompt is blocked: it never reaches the model.
    Blocked {
        /// Why, for the user.
        reason: String,
        /// Records to write (`hook_decision`, `hook_error`).
        records: Vec<OmniMessage>,
    },
}

/// Runs the `UserPromptSubmit` hooks on `prompt`.
pub(crate) async fn check_prompt(site: HookSite, prompt: String) -> PromptCheck {
    let event = HookEvent::UserPromptSubmit;
    let mut fields = Map::new();
    fields.insert("prompt".into(), json!(prompt));
    let Some(c) = site.run(event, "", fields).await else {
        return PromptCheck::Pass {
            context: Vec::new(),
            records: Vec::new(),
        };
    };
    let mut records = failure_records(Some(event), "", &c.failures);
    let blocked = match (&c.stop, c.decision) {
        (Some(stop), _) => Some(("stop", stop.clone())),
        (None, Some(Permission::Deny)) => Some(("block", c.reason.clone().unwrap_or_default())),
        _ => None,
    };
    if let Some((name, reason)) = blocked {
        let mut c = c;
        c.reason = Some(reason.clone());
        records.push(decision_record(event, &c, name, None));
        let reason = if reason.is_empty() {
            "blocked by a UserPromptSubmit hook (no reason given)".to_string()
        } else {
            reason
        };
        return PromptCheck::Blocked { reason, records };
    }
    PromptCheck::Pass {
        context: context_message(event, &c.context).into_iter().collect(),
        records,
    }
}

/// What the `Stop` (or `SubagentStop`) hooks said about ending a task.
pub(crate) struct StopCheck {
    /// The task goes on, with this reason fed to the model.
    pub(crate) continue_with: Option<String>,
    /// Records to write (`hook_decision`, `hook_error`).
    pub(crate) records: Vec<OmniMessage>,
}

/// Runs the `Stop` hooks (`SubagentStop` for a child session). `active`: this task already
/// went on because of a Stop hook (`stop_hook_active`). `allowed`: one more continuation is
/// within the cap (a block past it is recorded, and the task ends).
pub(crate) async fn check_stop(
    site: HookSite,
    subagent: bool,
    active: bool,
    allowed: bool,
) -> StopCheck {
    let event = if subagent {
        HookEvent::SubagentStop
    } else {
        HookEvent::Stop
    };
    let mut fields = Map::new();
    fields.insert("stop_hook_active".into(), json!(active));
    let Some(c) = site.run(event, "", fields).await else {
        return StopCheck {
            continue_with: None,
            records: Vec::new(),
        };
    };
    let mut records = failure_records(Some(event), "", &c.failures);
    let mut continue_with = None;
    if c.stop.is_some() {
        let mut c = c;
        c.reason = c.stop.clone();
        records.push(decision_record(event, &c, "stop", None));
    } else if c.decision == Some(Permission::Deny) {
        let reason = c
            .reason
            .clone()
            .unwrap_or_else(|| "a Stop hook asked to go on (no reason given)".to_string());
        if allowed {
            records.push(decision_record(event, &c, "continue", None));
            continue_with = Some(reason);
        } else {
            tracing::warn!(
                "{} hook asked to go on past the cap; the task ends",
                event.as_str()
            );
            records.push(decision_record(event, &c, "continue_capped", None));
        }
    }
    StopCheck {
        continue_with,
        records,
    }
}

/// Runs the `SessionStart` hooks (`source`: `startup`, `resume` or `compact`); returns the
/// records to write and the context for the model.
pub(crate) async fn session_start(
    site: &HookSite,
    source: &str,
) -> (Vec<OmniMessage>, Option<OmniMessage>) {
    let event = HookEvent::SessionStart;
    let mut fields = Map::new();
    fields.insert("source".into(), json!(source));
    match site.run(event, source, fields).await {
        None => (Vec::new(), None),
        Some(c) => (
            failure_records(Some(event), "", &c.failures),
            context_message(event, &c.context),
        ),
    }
}

/// Runs the `SessionEnd` hooks (`reason`: `exit`, `other`, …), best-effort and bounded: their
/// output is ignored, and the session stops waiting after [`SESSION_END_BOUND`].
pub(crate) async fn session_end(site: &HookSite, reason: &str) {
    let event = HookEvent::SessionEnd;
    if !site.hooks.has(event) {
        return;
    }
    let mut fields = Map::new();
    fields.insert("reason".into(), json!(reason));
    let run = site.run(event, reason, fields);
    match tokio::time::timeout(SESSION_END_BOUND, run).await {
        Ok(Some(c)) => {
            failure_records(Some(event), "", &c.failures);
        }
        Ok(None) => {}
        Err(_) => tracing::warn!("SessionEnd hooks still ran after {SESSION_END_BOUND:?}; left"),
    }
}

/// Runs the `PreCompact` hooks (`trigger`: `manual` or `auto`); their output is ignored, their
/// failures are returned as records.
pub(crate) async fn pre_compact(site: HookSite, trigger: &str) -> Vec<OmniMessage> {
    let event = HookEvent::PreCompact;
    let mut fields = Map::new();
    fields.insert("trigger".into(), json!(trigger));
    fields.insert("custom_instructions".into(), json!(""));
    match site.run(event, trigger, fields).await {
        None => Vec::new(),
        Some(c) => failure_records(Some(event), "", &c.failures),
    }
}
