//! The texts spawned agents and their parent exchange: the `[agent_report]` a child sends
//! after every round, and the `[agent_message]` wrapping a `send_message` to the parent.
//! Pure text (`docs/collaboration.md#reports`).

/// Longest answer text a report carries, in characters (the rest stays in the child's
/// history, see `read_session_history`).
pub const REPORT_CHARS: usize = 16_000;

/// The report of round `round` of `agent_id`; `detail` may be empty.
pub fn report(
    agent_id: &str,
    task_name: &str,
    round: u64,
    status: &str,
    detail: &str,
    answer: &str,
) -> String {
    let mut text = format!(
        "[agent_report]\nagent_id: {agent_id}\ntask_name: {task_name}\nround: {round}\nstatus: {status}\n"
    );
    if !detail.is_empty() {
        text.push_str(&format!("detail: {detail}\n"));
    }
    text.push_str("[/agent_report]\n");
    let n = answer.chars().count();
    if n > REPORT_CHARS {
        let kept: String = answer.chars().take(REPORT_CHARS).collect();
        text.push_str(&kept);
        text.push_str(&format!(
            "\n[... {} more chars; read_session_history shows the whole answer]",
            n - REPORT_CHARS
        ));
    } else if answer.is_empty() {
        text.push_str("(no text answer)");
    } else {
        text.push_str(answer);
    }
    text
}

/// A child's `send_message` to its parent.
pub fn message_to_parent(agent_id: &str, mode: &str, message: &str) -> String {
    format!("[agent_message]\nfrom: {agent_id}\nmode: {mode}\n[/agent_message]\n{message}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_carry_the_answer_and_say_how_the_round_ended() {
        assert_eq!(
            report("agent-00000001", "lint", 2, "completed", "", "all clean"),
            "[agent_report]\nagent_id: agent-00000001\ntask_name: lint\nround: 2\nstatus: completed\n[/agent_report]\nall clean"
        );
        let t = report(
            "agent-1",
            "x",
            1,
            "interrupted",
            "subagent aborted: interrupted",
            "",
        );
        assert!(t.contains("status: interrupted\ndetail: subagent aborted: interrupted\n"));
        assert!(t.ends_with("(no text answer)"));
        let long = report("a", "b", 1, "completed", "", &"y".repeat(REPORT_CHARS + 5));
        assert!(long.ends_with("[... 5 more chars; read_session_history shows the whole answer]"));
    }
}
