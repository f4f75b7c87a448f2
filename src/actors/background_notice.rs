//! The `[background_task_done]` user text (`docs/tools.md#background-notices`) that reports a finished background
//! command or subagent round, and the label and tail rules it uses. Pure text, no I/O.

/// Longest label, in characters (119 + `…` when cut).
const LABEL_CHARS: usize = 120;

/// Longest output tail, in characters.
pub const TAIL_CHARS: usize = 4000;

/// What finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeKind {
    /// A `run_in_background` command.
    Command,
    /// A background subagent.
    Subagent,
}

/// The first line of `text`, at most 120 characters (119 + `…` when longer).
pub fn label(text: &str) -> String {
    let first = text.lines().next().unwrap_or("").trim_end_matches('\r');
    if first.chars().count() > LABEL_CHARS {
        let mut s: String = first.chars().take(LABEL_CHARS - 1).collect();
        s.push('…');
        s
    } else {
        first.to_string()
    }
}

/// The last `TAIL_CHARS` characters of `output`, with the marker when cut.
pub fn tail(output: &str) -> String {
    let n = output.chars().count();
    if n <= TAIL_CHARS {
        return output.to_string();
    }
    let kept: String = output.chars().skip(n - TAIL_CHARS).collect();
    format!("[earlier output dropped: exceeded {TAIL_CHARS} chars]\n{kept}")
}

/// The notice text. `detail` and `tail` may be empty.
pub fn notice(
    kind: NoticeKind,
    id: &str,
    failed: bool,
    detail: &str,
    label: &str,
    tail: &str,
) -> String {
    let status = if failed { "failed" } else { "completed" };
    let verb = if failed { "failed" } else { "finished" };
    render(kind, id, status, verb, detail, label, tail)
}

/// The notice of a background command that was running on a node that died (status `lost`,
/// written by the node that took its session over; `docs/protocol.md#failover`). `cmd-` ids
/// (the openvaala profile's) are named `command_id`, others `process_id`.
pub fn lost_notice(id: &str, label: &str, node: &str) -> String {
    let detail = format!("the node running it ({node}) was lost; the command did not survive it");
    render(NoticeKind::Command, id, "lost", "lost", &detail, label, "")
}

fn render(
    kind: NoticeKind,
    id: &str,
    status: &str,
    verb: &str,
    detail: &str,
    label: &str,
    tail: &str,
) -> String {
    let (kind_name, noun, id_name) = match kind {
        NoticeKind::Command if id.starts_with("cmd-") => ("command", "command", "command_id"),
        NoticeKind::Command => ("command", "command", "process_id"),
        NoticeKind::Subagent => ("subagent", "subagent", "subagent_id"),
    };
    let mut text = format!(
        "[background_task_done]\n\
         Automatic notification from the harness, not the user: a background task you started has finished.\n\
         kind: {kind_name}\n\
         id: {id}\n\
         status: {status}\n"
    );
    if !detail.is_empty() {
        text.push_str(&format!("detail: {detail}\n"));
    }
    text.push_str("[/background_task_done]\n\n");
    text.push_str(&format!(
        "Background {noun} {verb}: `{label}` ({id_name} {id})"
    ));
    if !detail.is_empty() {
        text.push_str(&format!(" — {detail}"));
    }
    if !tail.is_empty() {
        text.push_str("\n\n");
        text.push_str(tail);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_notice_matches_the_reference() {
        let t = notice(
            NoticeKind::Command,
            "proc-12ab34cd",
            true,
            "exit code 3",
            "pnpm test",
            "boom",
        );
        assert_eq!(
            t,
            "[background_task_done]\nAutomatic notification from the harness, not the user: a background task you started has finished.\nkind: command\nid: proc-12ab34cd\nstatus: failed\ndetail: exit code 3\n[/background_task_done]\n\nBackground command failed: `pnpm test` (process_id proc-12ab34cd) — exit code 3\n\nboom"
        );
    }

    #[test]
    fn lost_notice_says_lost_and_names_the_node() {
        let t = lost_notice("proc-12ab34cd", "sleep 600", "node-a");
        assert!(
            t.starts_with("[background_task_done]\nAutomatic notification from the harness, not the user: a background task you started has finished.\nkind: command\nid: proc-12ab34cd\nstatus: lost\ndetail: the node running it (node-a) was lost; the command did not survive it\n[/background_task_done]\n\n"),
            "{t}"
        );
        assert!(t.ends_with("Background command lost: `sleep 600` (process_id proc-12ab34cd) — the node running it (node-a) was lost; the command did not survive it"), "{t}");
        assert!(lost_notice("cmd-0000abcd", "make", "b").contains("(command_id cmd-0000abcd)"));
    }

    #[test]
    fn subagent_notice_without_detail_or_tail() {
        let t = notice(NoticeKind::Subagent, "subagent-1", false, "", "lint", "");
        assert!(t.contains(
            "kind: subagent\nid: subagent-1\nstatus: completed\n[/background_task_done]"
        ));
        assert!(t.ends_with("Background subagent finished: `lint` (subagent_id subagent-1)"));
    }

    #[test]
    fn labels_and_tails_are_cut() {
        assert_eq!(label(&"x".repeat(200)).chars().count(), 120);
        assert_eq!(label("a\nb"), "a");
        let t = tail(&"y".repeat(5000));
        assert!(t.starts_with("[earlier output dropped: exceeded 4000 chars]\n"));
        assert_eq!(
            t.chars().count(),
            4000 + "[earlier output dropped: exceeded 4000 chars]\n"
                .chars()
                .count()
        );
    }
}
