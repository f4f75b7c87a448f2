//! Escalation out of the session's sandbox, as the shell tools of both profiles spell it: the
//! `sandbox_permissions: "require_escalated"` argument (with a `justification`), which tools
//! it applies to, the texts of a refused escalation, and the note a sandboxed command that
//! failed ends with.
//!
//! Texts and argument reading only: the gate decides an escalation (`approval::escalation_rule`),
//! the command tools act on it.

use serde_json::{Map, Value};

use crate::sandbox::SandboxPolicy;

/// The shell tools that accept `sandbox_permissions` (PenguinHarness's and OpenVaala's).
pub const SHELL_TOOLS: [&str; 2] = ["exec_command", "bash"];

/// The argument asking for escalation, and its one value that escalates.
pub const ARG: &str = "sandbox_permissions";
/// The value of [`ARG`] that runs the command outside the sandbox.
pub const REQUIRE_ESCALATED: &str = "require_escalated";

/// `approval_decision.reason` of an escalation denied by the approval mode.
pub const NOT_ALLOWED_REASON: &str =
    "escalation is denied under allow-all and deny-all unless sandbox.allow_escalation is true";

/// The schema of [`ARG`] in a shell tool's parameters.
pub fn arg_schema() -> Value {
    serde_json::json!({
        "type": "string",
        "enum": ["use_default", REQUIRE_ESCALATED],
        "description": "use_default (the default): run inside the session's sandbox. require_escalated: ask to run this one command outside it (always asked for approval; give a justification)."
    })
}

/// The schema of `justification` in a shell tool's parameters.
pub fn justification_schema() -> Value {
    serde_json::json!({
        "type": "string",
        "description": "With require_escalated: why the command needs to run outside the sandbox (shown to whoever approves it)."
    })
}

/// Whether a call's arguments ask to run outside the sandbox.
pub fn requires_escalation(args: &Map<String, Value>) -> bool {
    args.get(ARG).and_then(Value::as_str) == Some(REQUIRE_ESCALATED)
}

/// Whether a call of tool `name` with the arguments JSON text `arguments` asks for escalation
/// (only the shell tools can).
pub fn asks_escalation(name: &str, arguments: &str) -> bool {
    SHELL_TOOLS.contains(&name)
        && serde_json::from_str::<Map<String, Value>>(arguments)
            .is_ok_and(|args| requires_escalation(&args))
}

/// The output of an escalated call that was not approved.
pub fn denial(policy: &SandboxPolicy) -> String {
    format!(
        "Tool call denied: running outside the sandbox ({}) was not approved. Run the command inside the sandbox, or do without it.",
        policy.describe()
    )
}

/// The note a sandboxed command that exited non-zero ends with (none on exit 0).
pub fn failure_note(policy: &str) -> String {
    format!(
        "[sandbox: {policy} — ask with sandbox_permissions: \"require_escalated\" if the command needs more]"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_shell_tools_with_the_value_escalate() {
        let args = r#"{"cmd":"x","sandbox_permissions":"require_escalated","justification":"j"}"#;
        assert!(asks_escalation("exec_command", args));
        assert!(asks_escalation("bash", args));
        assert!(!asks_escalation("read_file", args));
        assert!(!asks_escalation(
            "exec_command",
            r#"{"cmd":"x","sandbox_permissions":"use_default"}"#
        ));
        assert!(!asks_escalation("exec_command", "not json"));
        assert_eq!(
            failure_note("workspace-write, network off"),
            "[sandbox: workspace-write, network off — ask with sandbox_permissions: \"require_escalated\" if the command needs more]"
        );
    }
}
