//! One test per rule of the conversation: each drives a `Conversation` through the changes the
//! executor applies (requests, commits, carry-over, compaction, task bounds, steer and notice
//! queues) and checks what it then holds. No actor, no process, no runtime.

use super::*;
use crate::message::{OmniMessage, Role, StopReason, build};

fn payload(msg: OmniMessage) -> ModelPayload {
    msg.as_model().cloned().expect("a model payload")
}

fn user(text: &str) -> ModelPayload {
    payload(build::user_text(text, None))
}

fn answer(text: &str) -> ModelPayload {
    payload(build::assistant_text(text, StopReason::Completed))
}

fn call(id: &str) -> ModelPayload {
    ModelPayload::ToolCall {
        role: Role::Assistant,
        name: "read_file".into(),
        arguments: "{}".into(),
        tool_call_id: id.into(),
        stop_reason: StopReason::Completed,
        fidelity: None,
    }
}

fn output(id: &str) -> ModelPayload {
    payload(build::tool_call_output(
        id,
        "done",
        Vec::new(),
        StopReason::Completed,
    ))
}

/// Short labels of payloads, in order: `U:<text>`, `A:<text>`, `call:<id>`, `out:<id>`.
fn ids(payloads: &[ModelPayload]) -> Vec<String> {
    payloads
        .iter()
        .map(|p| match p {
            ModelPayload::Text {
                role: Role::User,
                text,
                ..
            } => format!("U:{text}"),
            ModelPayload::Text { text, .. } => format!("A:{text}"),
            ModelPayload::ToolCall { tool_call_id, .. } => format!("call:{tool_call_id}"),
            ModelPayload::ToolCallOutput { tool_call_id, .. } => format!("out:{tool_call_id}"),
            _ => "other".to_string(),
        })
        .collect()
}

/// One completed task: it opens, sends `input`, commits `produced`, and closes.
fn task(c: &mut Conversation, input: &str, produced: &str) {
    c.open_task();
    c.begin_request(vec![user(input)]);
    c.commit(vec![answer(produced)]);
    c.close_task();
}

#[test]
fn a_new_conversation_has_its_whole_history_committed() {
    let c = Conversation::new(
        Arc::new(vec![user("a"), answer("b")]),
        vec![user("carried")],
        Vec::new(),
    );
    assert_eq!(ids(c.committed()), ["U:a", "A:b"]);
    assert_eq!(ids(c.history()), ["U:a", "A:b"]);
    assert_eq!(ids(c.carry_over()), ["U:carried"]);
    assert!(!c.input_waiting());
}

#[test]
fn a_request_input_follows_the_committed_turns_uncommitted() {
    let mut c = Conversation::new(Arc::new(vec![user("a"), answer("b")]), Vec::new(), vec![]);
    let sent = c.begin_request(vec![user("c")]);
    assert_eq!(ids(&sent), ["U:a", "A:b", "U:c"]);
    assert_eq!(ids(c.history()), ["U:a", "A:b", "U:c"]);
    assert_eq!(ids(c.committed()), ["U:a", "A:b"]);
}

#[test]
fn the_next_request_drops_the_uncommitted_input_of_the_last() {
    let mut c = Conversation::default();
    c.begin_request(vec![user("attempt 1")]);
    let sent = c.begin_request(vec![user("attempt 2"), user("retry note")]);
    assert_eq!(ids(&sent), ["U:attempt 2", "U:retry note"]);
    assert!(c.committed().is_empty());
}

#[test]
fn a_commit_keeps_the_input_and_what_the_request_produced() {
    let mut c = Conversation::default();
    c.begin_request(vec![user("go")]);
    c.commit(vec![call("c0")]);
    assert_eq!(ids(c.committed()), ["U:go", "call:c0"]);
    // The next request's input comes after all of it.
    let sent = c.begin_request(vec![output("c0")]);
    assert_eq!(ids(&sent), ["U:go", "call:c0", "out:c0"]);
    c.commit(vec![answer("ok")]);
    assert_eq!(ids(c.committed()), ["U:go", "call:c0", "out:c0", "A:ok"]);
}

#[test]
fn a_request_still_out_keeps_the_history_it_was_sent_with() {
    let mut c = Conversation::default();
    let first = c.begin_request(vec![user("attempt 1")]);
    let second = c.begin_request(vec![user("attempt 2")]);
    assert_eq!(ids(&first), ["U:attempt 1"]);
    assert_eq!(ids(&second), ["U:attempt 2"]);
    // Without an old request holding it, the history is extended in place.
    drop(first);
    drop(second);
    let before = Arc::as_ptr(&c.history);
    c.commit(vec![answer("ok")]);
    assert_eq!(Arc::as_ptr(&c.history), before);
}

#[test]
fn the_carry_over_is_set_and_taken_once() {
    let mut c = Conversation::default();
    c.set_carry_over(vec![output("c0"), user("aborted")]);
    assert_eq!(ids(c.carry_over()), ["out:c0", "U:aborted"]);
    assert_eq!(ids(&c.take_carry_over()), ["out:c0", "U:aborted"]);
    assert!(c.take_carry_over().is_empty());
    // A new carry-over replaces the old one.
    c.set_carry_over(vec![user("one")]);
    c.set_carry_over(vec![user("two")]);
    assert_eq!(ids(c.carry_over()), ["U:two"]);
}

#[test]
fn only_committed_turns_or_a_carry_over_are_context_to_compact() {
    let mut c = Conversation::default();
    assert!(!c.has_context());
    c.begin_request(vec![user("never completed")]);
    assert!(!c.has_context());
    c.set_carry_over(vec![user("carried")]);
    assert!(c.has_context());
    c.take_carry_over();
    c.commit(vec![answer("ok")]);
    assert!(c.has_context());
}

#[test]
fn a_compaction_replaces_the_context_and_forgets_the_task_spans() {
    let mut c = Conversation::default();
    task(&mut c, "one", "a");
    task(&mut c, "two", "b");
    c.queue_steer(user("steer"));
    c.queue_notice(user("notice"));
    c.replace_context();
    assert!(c.history().is_empty());
    assert!(c.committed().is_empty());
    assert!(!c.has_context());
    assert!(c.fork(ForkTurns::All, false).is_empty());
    // What waits for the next input is not part of the replaced context.
    assert!(c.input_waiting());
    // The summary is the new context's first input; the running task continues from it, and
    // its span begins there.
    let sent = c.begin_request(vec![user("[context_summary]")]);
    assert_eq!(ids(&sent), ["U:[context_summary]"]);
    c.commit(vec![call("c0")]);
    c.begin_request(vec![output("c0")]);
    c.commit(vec![answer("c")]);
    c.close_task();
    let context = ["U:[context_summary]", "call:c0", "out:c0", "A:c"];
    assert_eq!(ids(&c.fork(ForkTurns::Last(1), false)), context);
    // One task in the new context: asking for two copies it once.
    assert_eq!(ids(&c.fork(ForkTurns::Last(2), false)), context);
}

#[test]
fn a_compaction_keeps_the_carry_over() {
    let mut c = Conversation::default();
    task(&mut c, "one", "a");
    c.set_carry_over(vec![user("left over")]);
    c.replace_context();
    assert_eq!(ids(c.carry_over()), ["U:left over"]);
    assert!(c.has_context());
}

#[test]
fn each_completed_task_is_a_span_fork_may_copy() {
    let mut c = Conversation::default();
    task(&mut c, "one", "a");
    task(&mut c, "two", "b");
    task(&mut c, "three", "c");
    assert_eq!(
        ids(&c.fork(ForkTurns::Last(2), false)),
        ["U:two", "A:b", "U:three", "A:c"]
    );
    assert_eq!(ids(&c.fork(ForkTurns::Last(1), false)), ["U:three", "A:c"]);
    assert!(c.fork(ForkTurns::None, false).is_empty());
    // More tasks than there are: all of the context.
    assert_eq!(c.fork(ForkTurns::Last(4), false).len(), 6);
    assert_eq!(c.fork(ForkTurns::All, false).len(), 6);
}

#[test]
fn a_task_that_committed_nothing_leaves_no_span() {
    let mut c = Conversation::default();
    task(&mut c, "one", "a");
    // Aborted before its request completed: its input is never committed.
    c.open_task();
    c.begin_request(vec![user("aborted")]);
    c.close_task();
    task(&mut c, "three", "c");
    assert_eq!(
        ids(&c.fork(ForkTurns::Last(2), false)),
        ["U:one", "A:a", "U:three", "A:c"]
    );
}

#[test]
fn the_running_task_is_never_forked() {
    let mut c = Conversation::default();
    task(&mut c, "one", "a");
    c.open_task();
    c.begin_request(vec![user("two")]);
    c.commit(vec![call("c0")]);
    c.begin_request(vec![output("c0")]);
    assert_eq!(ids(&c.fork(ForkTurns::All, true)), ["U:one", "A:a"]);
    assert_eq!(ids(&c.fork(ForkTurns::Last(1), true)), ["U:one", "A:a"]);
    // Idle, the committed part is forked, never the uncommitted input (the call's output,
    // whose call is then left out too).
    assert_eq!(
        ids(&c.fork(ForkTurns::All, false)),
        ["U:one", "A:a", "U:two"]
    );
}

#[test]
fn a_fork_leaves_out_calls_and_outputs_without_their_pair() {
    let mut c = Conversation::default();
    c.open_task();
    c.begin_request(vec![user("one")]);
    c.commit(vec![call("c0")]);
    c.close_task();
    // The next task's input carries the output of the last task's call.
    c.open_task();
    c.begin_request(vec![output("c0"), user("two")]);
    c.commit(vec![answer("b")]);
    c.close_task();
    assert_eq!(ids(&c.fork(ForkTurns::Last(1), false)), ["U:two", "A:b"]);
    // With both tasks the pair is whole.
    assert_eq!(
        ids(&c.fork(ForkTurns::Last(2), false)),
        ["U:one", "call:c0", "out:c0", "U:two", "A:b"]
    );
}

#[test]
fn a_resumed_conversation_keeps_its_task_spans() {
    let history = vec![user("one"), answer("a"), user("two"), answer("b")];
    let c = Conversation::new(Arc::new(history), Vec::new(), vec![(0, 2), (2, 4)]);
    assert_eq!(ids(&c.fork(ForkTurns::Last(1), false)), ["U:two", "A:b"]);
}

#[test]
fn steers_leave_in_arrival_order_exactly_once() {
    let mut c = Conversation::default();
    c.queue_steer(user("s1"));
    assert!(c.input_waiting());
    c.queue_steer(user("s2"));
    assert_eq!(ids(&c.take_steers()), ["U:s1", "U:s2"]);
    assert!(c.take_steers().is_empty());
    assert!(!c.input_waiting());
}

#[test]
fn notices_leave_in_arrival_order_exactly_once() {
    let mut c = Conversation::default();
    c.queue_notice(user("n1"));
    c.queue_notice(user("n2"));
    assert!(c.input_waiting());
    assert_eq!(ids(&c.take_notices()), ["U:n1", "U:n2"]);
    assert!(c.take_notices().is_empty());
    assert!(!c.input_waiting());
}

#[test]
fn steers_and_notices_wait_apart() {
    let mut c = Conversation::default();
    c.queue_notice(user("n1"));
    c.queue_steer(user("s1"));
    assert_eq!(ids(&c.take_steers()), ["U:s1"]);
    // A notice still waits.
    assert!(c.input_waiting());
    assert_eq!(ids(&c.take_notices()), ["U:n1"]);
    assert!(!c.input_waiting());
}

#[test]
fn queued_input_is_not_history() {
    let mut c = Conversation::default();
    c.queue_steer(user("s1"));
    c.queue_notice(user("n1"));
    c.set_carry_over(vec![user("carried")]);
    assert!(c.history().is_empty());
    assert!(c.fork(ForkTurns::All, false).is_empty());
}

#[test]
fn a_rollback_drops_the_last_completed_tasks_and_what_follows() {
    let mut c = Conversation::default();
    for (u, a) in [("one", "a"), ("two", "b"), ("three", "c")] {
        c.open_task();
        c.begin_request(vec![user(u)]);
        c.commit(vec![answer(a)]);
        c.close_task();
    }
    assert_eq!(c.rollback(0), None);
    assert_eq!(c.rollback(4), None);
    assert_eq!(c.history().len(), 6, "a refused rollback changes nothing");
    assert_eq!(c.rollback(2), Some(4));
    assert_eq!(ids(c.committed()), ["U:one", "A:a"]);
    assert_eq!(c.completed_count(), 1);
    // The next task follows the kept one, and is a span a fork may copy.
    c.open_task();
    c.begin_request(vec![user("four")]);
    c.commit(vec![answer("d")]);
    c.close_task();
    assert_eq!(ids(&c.fork(ForkTurns::Last(1), false)), ["U:four", "A:d"]);
}
