//! Unit tests of resume over hand-written record lists (real sessions are in `tests/suite/resume.rs`).

use serde_json::json;

use super::*;
use crate::message::{Decision, Sender, build};

fn meta() -> OmniMessage {
    OmniMessage::session_meta(SessionMeta {
        session_id: "session-2026-07-18-11-10-22-3f8a1c2d".into(),
        provider: "scripted".into(),
        model_id: "scripted".into(),
        model_context_window: json!(1000),
        system_prompt: "be brief".into(),
        agent_state: "/ws".into(),
        workspace: "/ws".into(),
        source: None,
        approval_mode: None,
        forked_from: None,
        owner: None,
        launch: Default::default(),
    })
}

#[test]
fn the_last_recorded_approval_mode_wins_and_none_means_unknown() {
    let mode = |m: &str| {
        OmniMessage::event(crate::message::EventPayload::ApprovalModeChanged { mode: m.into() })
    };
    assert_eq!(resume_from_records(&[meta()]).unwrap().approval_mode, None);
    let mut first = meta();
    if let crate::message::Payload::SessionMeta(m) = &mut first.payload {
        m.approval_mode = Some("always-ask".into());
    }
    let r = resume_from_records(std::slice::from_ref(&first)).unwrap();
    assert_eq!(r.approval_mode.as_deref(), Some("always-ask"));
    let r = resume_from_records(&[first, mode("read-only"), mode("allow-all")]).unwrap();
    assert_eq!(r.approval_mode.as_deref(), Some("allow-all"));
}

fn m(record: &OmniMessage) -> ModelPayload {
    record.as_model().cloned().unwrap()
}

fn user(text: &str) -> OmniMessage {
    build::user_text(text, None)
}

fn said(text: &str) -> OmniMessage {
    build::assistant_text(text, StopReason::Completed)
}

fn call(id: &str) -> OmniMessage {
    build::tool_call("read_file", r#"{"file_path":"a"}"#, id)
}

fn out(id: &str, text: &str) -> OmniMessage {
    build::tool_call_output(id, text, Vec::new(), StopReason::Completed)
}

fn usage(total: u64) -> Usage {
    Usage {
        cache_read: 0,
        cache_write: 0,
        output: total / 2,
        total,
    }
}

fn tokens(session: u64, request: u64) -> OmniMessage {
    build::token_usage(usage(session), usage(request))
}

fn begin() -> OmniMessage {
    build::request_begin()
}

fn end() -> OmniMessage {
    build::request_end(StopReason::Completed, None, None, None)
}

fn allow(id: &str) -> OmniMessage {
    build::approval_decision(Decision::Allow, id)
}

fn ids(messages: &[ModelPayload]) -> Vec<String> {
    messages
        .iter()
        .map(|p| match p {
            ModelPayload::Text { role, text, .. } => format!("{role:?}:{text}"),
            ModelPayload::Thinking { thinking, .. } => format!("thinking:{thinking}"),
            ModelPayload::ToolCall { tool_call_id, .. } => format!("call:{tool_call_id}"),
            ModelPayload::ToolCallOutput {
                tool_call_id,
                output,
                ..
            } => format!("out:{tool_call_id}:{output}"),
            other => format!("{other:?}"),
        })
        .collect()
}

/// `history + carry_over` pairs every tool_call with exactly one output, after it, in call order.
fn assert_pairing(state: &ResumeState) {
    let all: Vec<ModelPayload> = state
        .history
        .iter()
        .chain(&state.carry_over)
        .cloned()
        .collect();
    let mut calls = Vec::new();
    let mut outputs = Vec::new();
    for (i, p) in all.iter().enumerate() {
        match p {
            ModelPayload::ToolCall { tool_call_id, .. } => calls.push((tool_call_id.clone(), i)),
            ModelPayload::ToolCallOutput { tool_call_id, .. } => {
                outputs.push((tool_call_id.clone(), i))
            }
            _ => {}
        }
    }
    let call_order: Vec<&String> = calls.iter().map(|c| &c.0).collect();
    let output_order: Vec<&String> = outputs.iter().map(|o| &o.0).collect();
    assert_eq!(call_order, output_order, "{:#?}", ids(&all));
    for ((_, c), (_, o)) in calls.iter().zip(&outputs) {
        assert!(c < o, "{:#?}", ids(&all));
    }
}

const EXITED: &str = "[interrupted: process exited before the tool finished]";

#[test]
fn clean_multi_turn_trace() {
    let records = vec![
        meta(),
        user("go"),
        build::tool_list_ready(vec![json!({"name": "read_file"})]),
        begin(),
        build::thinking("plan"),
        said("reading"),
        call("call_0"),
        allow("call_0"),
        call("call_1"),
        allow("call_1"),
        out("call_1", "B"), // completion order, inside the request span
        tokens(10, 10),
        end(),
        out("call_0", "A"), // after request_end
        begin(),
        said("done"),
        tokens(25, 15),
        end(),
        build::task_end(StopReason::Completed),
        user("again"),
        begin(),
        said("sure"),
        tokens(40, 15),
        end(),
        build::task_end(StopReason::Completed),
    ];
    let state = resume_from_records(&records).unwrap();
    assert_eq!(
        ids(&state.history),
        [
            "User:go",
            "thinking:plan",
            "Assistant:reading",
            "call:call_0",
            "call:call_1",
            "out:call_0:A",
            "out:call_1:B",
            "Assistant:done",
            "User:again",
            "Assistant:sure"
        ]
    );
    assert_eq!(state.history[5], m(&records[13]));
    assert!(state.carry_over.is_empty());
    assert_eq!(state.turns, 3);
    assert_eq!(state.session_usage, usage(40));
    assert!(state.tools_announced);
    assert_eq!(state.next_call_index, 2);
    assert_eq!(
        state.meta.session_id,
        "session-2026-07-18-11-10-22-3f8a1c2d"
    );
    assert_pairing(&state);
}

#[test]
fn cut_after_request_begin_puts_the_input_back() {
    let records = vec![meta(), user("go"), build::tool_list_ready(vec![]), begin()];
    let state = resume_from_records(&records).unwrap();
    assert!(state.history.is_empty());
    assert_eq!(state.carry_over, vec![m(&records[1])]);
    assert_eq!(state.turns, 0);
    assert!(state.tools_announced);

    // A committed first turn, then a second request cut mid-stream: its text is lost, the
    // tool output it was sent stays owed and comes back as carry-over.
    let records = vec![
        meta(),
        user("go"),
        begin(),
        call("call_0"),
        tokens(5, 5),
        end(),
        out("call_0", "A"),
        begin(),
        said("half an answ"),
        call("call_1"),
    ];
    let state = resume_from_records(&records).unwrap();
    assert_eq!(ids(&state.history), ["User:go", "call:call_0"]);
    assert_eq!(ids(&state.carry_over), ["out:call_0:A"]);
    assert_eq!(state.turns, 1);
    assert_eq!(state.next_call_index, 2, "ids of lost output still count");
    assert_pairing(&state);
}

#[test]
fn cut_before_the_output_gives_a_placeholder() {
    let records = vec![
        meta(),
        user("go"),
        begin(),
        call("call_0"),
        call("call_1"),
        tokens(5, 5),
        end(),
        allow("call_0"),
        allow("call_1"),
        out("call_1", "B"),
    ];
    let state = resume_from_records(&records).unwrap();
    assert_eq!(
        ids(&state.history),
        ["User:go", "call:call_0", "call:call_1"]
    );
    assert_eq!(
        state.carry_over,
        vec![
            ModelPayload::ToolCallOutput {
                role: Role::User,
                output: EXITED.into(),
                images: vec![],
                tool_call_id: "call_0".into(),
                stop_reason: StopReason::Aborted,
            },
            m(&records[9]),
        ]
    );
    assert_eq!(placeholder("call_0"), state.carry_over[0]);
    assert_pairing(&state);
}

#[test]
fn outputs_landing_inside_the_next_request_span() {
    let head = vec![
        meta(),
        user("go"),
        begin(),
        call("call_0"),
        call("call_1"),
        tokens(5, 5),
        end(),
        out("call_0", "A"),
        begin(),
        out("call_1", "B"), // lands inside the next request's span
    ];
    // That request is cut: both outputs are carried over, in call order.
    let state = resume_from_records(&head).unwrap();
    assert_eq!(ids(&state.carry_over), ["out:call_0:A", "out:call_1:B"]);
    assert_pairing(&state);

    // That request commits: it was sent without call_1's output, so history holds a
    // placeholder for it and the late real output is not owed any more.
    let mut records = head;
    records.extend([said("ok"), tokens(9, 4), end()]);
    let state = resume_from_records(&records).unwrap();
    assert_eq!(
        ids(&state.history),
        [
            "User:go",
            "call:call_0",
            "call:call_1",
            "out:call_0:A",
            &format!("out:call_1:{EXITED}"),
            "Assistant:ok"
        ]
    );
    assert!(state.carry_over.is_empty());
    assert_eq!(state.turns, 2);
    assert_pairing(&state);

    // An output landing inside the span of the request that made the call belongs to the
    // next request's input.
    let records = vec![
        meta(),
        user("go"),
        begin(),
        call("call_0"),
        allow("call_0"),
        out("call_0", "A"),
        tokens(5, 5),
        end(),
        begin(),
        said("done"),
        tokens(9, 4),
        end(),
    ];
    let state = resume_from_records(&records).unwrap();
    assert_eq!(
        ids(&state.history),
        ["User:go", "call:call_0", "out:call_0:A", "Assistant:done"]
    );
    assert_pairing(&state);
}

#[test]
fn aborted_task_keeps_pairing() {
    // Case A: calls committed, one still running at the abort.
    let mut records = vec![
        meta(),
        user("go"),
        begin(),
        call("call_0"),
        call("call_1"),
        tokens(5, 5),
        end(),
        allow("call_0"),
        allow("call_1"),
        out("call_1", "B"),
        build::abort(Some("aborted by user".into())),
        build::task_end(StopReason::Aborted),
    ];
    let state = resume_from_records(&records).unwrap();
    assert_eq!(
        ids(&state.carry_over),
        [format!("out:call_0:{EXITED}"), "out:call_1:B".to_string()]
    );
    assert_pairing(&state);

    // The next task was sent the carry-over (not traced) and its own input.
    records.extend([
        user("continue"),
        begin(),
        said("resumed"),
        tokens(9, 4),
        end(),
    ]);
    let state = resume_from_records(&records).unwrap();
    assert_eq!(
        ids(&state.history),
        [
            "User:go",
            "call:call_0",
            "call:call_1",
            &format!("out:call_0:{EXITED}"),
            "out:call_1:B",
            "User:continue",
            "Assistant:resumed"
        ]
    );
    assert!(state.carry_over.is_empty());
    assert_pairing(&state);

    // Case B: aborted mid-stream (no request_end): the round is dropped at the abort, so the
    // late output of its uncommitted call is not owed.
    let records = vec![
        meta(),
        user("go"),
        begin(),
        said("half"),
        call("call_0"),
        allow("call_0"),
        out("call_0", "[interrupted: tool aborted by user]"),
        build::abort(Some("aborted by user".into())),
        build::task_end(StopReason::Aborted),
        user("next"),
    ];
    let state = resume_from_records(&records).unwrap();
    assert!(state.history.is_empty());
    assert_eq!(ids(&state.carry_over), ["User:go", "User:next"]);
    assert_eq!(state.turns, 0);
    assert_pairing(&state);
}

#[test]
fn failed_attempts_are_dropped_and_retried_input_commits_once() {
    let records = vec![
        meta(),
        user("go"),
        begin(),
        call("call_0"),
        build::request_end(StopReason::Failed, Some("boom".into()), Some(1), Some(0)),
        out("call_0", "cancelled"),
        begin(),
        said("ok"),
        tokens(7, 7),
        build::request_end(StopReason::Completed, None, Some(2), None),
        build::task_end(StopReason::Completed),
    ];
    let state = resume_from_records(&records).unwrap();
    assert_eq!(ids(&state.history), ["User:go", "Assistant:ok"]);
    assert!(state.carry_over.is_empty());
    assert_eq!(state.turns, 1);
    assert_eq!(state.next_call_index, 1);
    assert_pairing(&state);
}

#[test]
fn notices_origin_tags_and_stray_assistant_text() {
    let notice = build::user_text("[background] done", Some(Sender::Harness));
    let records = vec![
        meta(),
        user("go"),
        begin(),
        said("hi").with_origin("session-child"),
        said("hello"),
        tokens(3, 3),
        end(),
        build::assistant_text("[reached max turns (1); stopping]", StopReason::Failed),
        user("child says").with_origin("session-child"),
        notice.clone(),
    ];
    let state = resume_from_records(&records).unwrap();
    assert_eq!(ids(&state.history), ["User:go", "Assistant:hello"]);
    assert_eq!(state.carry_over, vec![m(&notice)]);
}

#[test]
fn compaction_spans_are_skipped_and_discard_closes_the_context() {
    let compact_begin = OmniMessage::event(EventPayload::CompactionBegin {
        reason: "manual".into(),
        mode: "discard".into(),
        context: Some(100),
        turns: Some(1),
    });
    let compact_end = |status| {
        OmniMessage::event(EventPayload::CompactionEnd {
            reason: "manual".into(),
            mode: "discard".into(),
            status,
            attempt: None,
            error_message: None,
        })
    };
    let mut records = vec![
        meta(),
        user("go"),
        begin(),
        said("hi"),
        tokens(3, 3),
        end(),
        compact_begin,
        user("summarize please"),
        begin(),
        said("summary"),
        tokens(8, 5),
        end(),
    ];
    let mut failed = records.clone();
    failed.push(compact_end(StopReason::Failed));
    let state = resume_from_records(&failed).unwrap();
    assert_eq!(ids(&state.history), ["User:go", "Assistant:hi"]);
    assert!(state.carry_over.is_empty());
    assert_eq!(state.turns, 1);
    assert_eq!(state.session_usage, usage(8));

    records.push(compact_end(StopReason::Completed));
    let state = resume_from_records(&records).unwrap();
    assert!(state.history.is_empty() && state.carry_over.is_empty());
    assert_eq!(state.turns, 0);
    assert_eq!(state.session_usage, usage(8));
}

#[test]
fn next_call_index_takes_the_highest_call_number() {
    let records = vec![
        meta(),
        user("go"),
        begin(),
        call("call_3#2"),
        call("toolu_01abc"),
        call("call_x"),
        call("call_"),
        call("call_12"),
        call("call_7"),
        tokens(1, 1),
        end(),
    ];
    let state = resume_from_records(&records).unwrap();
    assert_eq!(state.next_call_index, 13);
    assert_eq!(state.carry_over.len(), 6);
    assert_pairing(&state);
    assert_eq!(
        resume_from_records(&[meta(), user("x")])
            .unwrap()
            .next_call_index,
        0
    );
    assert_eq!(call_index("call_18446744073709551615"), Some(u64::MAX));
    assert_eq!(call_index("call_18446744073709551616"), None);
    assert_eq!(call_index("call_+5"), None);
}

#[test]
fn missing_meta_is_an_error() {
    let err = resume_from_records(&[user("go"), begin()]).unwrap_err();
    assert_eq!(err, ResumeError::NoMeta);
    assert_eq!(err.to_string(), "trace has no session_meta; cannot resume");
    assert_eq!(resume_from_records(&[]).unwrap_err(), ResumeError::NoMeta);
    // Only the first session_meta counts.
    let mut second = meta();
    if let Payload::SessionMeta(m) = &mut second.payload {
        m.session_id = "other".into();
    }
    let state = resume_from_records(&[meta(), second]).unwrap();
    assert_eq!(
        state.meta.session_id,
        "session-2026-07-18-11-10-22-3f8a1c2d"
    );
}

#[test]
fn torn_last_line_via_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s_001.jsonl");
    let records = vec![
        meta(),
        user("go"),
        begin(),
        call("call_0"),
        tokens(5, 5),
        end(),
        out("call_0", "A"),
        begin(),
        said("done"),
        tokens(9, 4),
        end(),
    ];
    let mut text: String = records.iter().map(|r| r.to_json() + "\n").collect();
    let torn = build::task_end(StopReason::Completed).to_json();
    text.push_str(&torn[..torn.len() / 2]);
    std::fs::write(&path, &text).unwrap();
    let state = resume_from_file(&path).unwrap();
    assert_eq!(state, resume_from_records(&records).unwrap());
    assert_eq!(
        ids(&state.history),
        ["User:go", "call:call_0", "out:call_0:A", "Assistant:done"]
    );

    // Torn in the middle of request_end: the last request is not committed.
    let cut = text.len() - torn.len() / 2 - end().to_json().len() / 2 - 1;
    std::fs::write(&path, &text[..cut]).unwrap();
    let state = resume_from_file(&path).unwrap();
    assert_eq!(ids(&state.history), ["User:go", "call:call_0"]);
    assert_eq!(ids(&state.carry_over), ["out:call_0:A"]);
    assert_eq!(state.turns, 1);

    let missing = resume_from_file(dir.path().join("none.jsonl")).unwrap_err();
    assert!(
        matches!(&missing, ResumeFileError::Read(e) if e.kind() == std::io::ErrorKind::NotFound),
        "{missing}"
    );
    std::fs::write(&path, user("go").to_json() + "\n").unwrap();
    let no_meta = resume_from_file(&path).unwrap_err();
    assert_eq!(
        no_meta.to_string(),
        "trace error: trace has no session_meta; cannot resume"
    );
}

#[test]
fn reading_a_trace_for_resume_leaves_the_async_worker_free() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let mut text = format!("{}\n", meta().to_json());
    for i in 0..5000 {
        text.push_str(&user(&format!("line {i}")).to_json());
        text.push('\n');
    }
    std::fs::write(&path, text).unwrap();
    // One worker: if the read ran on it, the ticker could not run before the read ends.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let ticks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let t = ticks.clone();
        let ticker = tokio::spawn(async move {
            loop {
                t.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::task::yield_now().await;
            }
        });
        let state = resume_from_file_off_runtime(path).await.unwrap();
        assert_eq!(state.carry_over.len(), 5000);
        assert!(
            ticks.load(std::sync::atomic::Ordering::SeqCst) > 0,
            "the async worker was held during the read"
        );
        ticker.abort();
    });
}

#[test]
fn calls_without_an_output_in_the_file_are_named_once_for_recording() {
    let begin = build::request_begin;
    let end = || build::request_end(StopReason::Completed, None, None, None);
    // call_0 answered; call_1 committed, in flight at the crash; call_2 of a request the crash
    // cut before its end (not context, but its record is in the file).
    let records = [
        meta(),
        user("go"),
        begin(),
        call("call_0"),
        end(),
        out("call_0", "a"),
        begin(),
        call("call_1"),
        end(),
        begin(),
        call("call_2"),
    ];
    let r = resume_from_records(&records).unwrap();
    assert_eq!(r.unpaired, ["call_1", "call_2"]);
    // The committed one is owed its placeholder in the next input as before.
    assert!(r.carry_over.contains(&placeholder("call_1")));
    assert!(!r.carry_over.contains(&placeholder("call_2")));

    // Once recorded, they are found: nothing is named again, and the input is the same.
    let mut recorded = records.to_vec();
    recorded.extend([
        OmniMessage::model(placeholder("call_1")),
        OmniMessage::model(placeholder("call_2")),
    ]);
    let again = resume_from_records(&recorded).unwrap();
    assert!(again.unpaired.is_empty());
    assert_eq!(again.carry_over, r.carry_over);
    assert_eq!(again.history, r.history);
}
