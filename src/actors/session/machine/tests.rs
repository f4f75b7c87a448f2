//! One test per rule of the turn state machine: each feeds the pure transitions an input and
//! checks the effects they return, in order. No actor, no process, no runtime.

use super::*;
use crate::message::{Decision, StopReason};
use crate::model::{ModelEvent, ModelOutcome};

/// The task's state and what the machine reads of the session, owned by the test.
struct Fixture {
    task: Option<Box<Task>>,
    turns: u64,
    usage: Usage,
    next_id: u64,
    max_turns: i64,
    retry: RetryPolicy,
    input_waiting: bool,
    mcp_servers: bool,
    mcp_synced: Option<(u64, u32)>,
    compacting: bool,
    trace_failure: Option<String>,
    stop_hooks: bool,
}

impl Fixture {
    fn new() -> Self {
        Fixture {
            task: None,
            turns: 0,
            usage: Usage::default(),
            next_id: 1,
            max_turns: -1,
            retry: RetryPolicy {
                max_retries: 2,
                base_ms: 100,
                cap_ms: 1_000,
            },
            input_waiting: false,
            mcp_servers: false,
            mcp_synced: None,
            compacting: false,
            trace_failure: None,
            stop_hooks: false,
        }
    }

    fn m(&mut self) -> Machine<'_> {
        Machine {
            task: &mut self.task,
            turns: &mut self.turns,
            session_usage: &mut self.usage,
            next_turn_id: &mut self.next_id,
            max_turns: self.max_turns,
            retry: self.retry,
            input_waiting: self.input_waiting,
            mcp_servers: self.mcp_servers,
            mcp_synced: self.mcp_synced,
            compacting: self.compacting,
            trace_failure: self.trace_failure.clone(),
            stop_hooks: self.stop_hooks,
            max_stop_continuations: 1,
        }
    }

    fn turn(&self) -> &Turn {
        &self.task.as_ref().expect("a task runs").turn
    }

    /// A started task whose stream produced `calls` (ids `c0`, `c1`, …) and, if `end`, completed.
    fn with_calls(calls: usize, end: bool) -> Fixture {
        let mut f = Fixture::new();
        f.m().start(vec![user("go")]);
        for i in 0..calls {
            f.m().on_model_event(1, call(&format!("c{i}")));
        }
        if end {
            f.m()
                .on_model_event(1, ModelEvent::End(ModelOutcome::completed()));
        }
        f
    }
}

fn user(text: &str) -> ModelPayload {
    build::user_text(text, None)
        .as_model()
        .cloned()
        .expect("a model payload")
}

fn call(id: &str) -> ModelEvent {
    ModelEvent::Complete(ModelPayload::ToolCall {
        role: Role::Assistant,
        name: "read_file".into(),
        arguments: "{}".into(),
        tool_call_id: id.into(),
        stop_reason: StopReason::Completed,
        fidelity: None,
    })
}

fn answer(text: &str) -> ModelEvent {
    ModelEvent::Complete(ModelPayload::Text {
        role: Role::Assistant,
        text: text.into(),
        sender: None,
        stop_reason: StopReason::Completed,
        fidelity: None,
    })
}

fn failed(status: StopReason, detail: &str) -> ModelEvent {
    ModelEvent::End(ModelOutcome::error(status, detail))
}

fn allow() -> Verdict {
    Verdict::new(Decision::Allow, "mode", None)
}

fn deny() -> Verdict {
    Verdict::new(Decision::Deny, "user", None)
}

fn output(id: &str, text: &str) -> OmniMessage {
    build::tool_call_output(id, text, Vec::new(), StopReason::Completed)
}

/// A short label of a message: its payload type and the fields a rule is about.
fn label(msg: &OmniMessage) -> String {
    let v: serde_json::Value = serde_json::from_str(&msg.to_json()).expect("json");
    let p = &v["payload"];
    let s = |k: &str| p[k].as_str().unwrap_or("").to_string();
    let kind = s("type");
    match kind.as_str() {
        "tool_call" => format!("tool_call {}", s("tool_call_id")),
        "tool_call_output" => format!(
            "output {} {} {}",
            s("tool_call_id"),
            s("stop_reason"),
            s("output")
        ),
        "approval_decision" => format!("decision {} {}", s("decision"), s("tool_call_id")),
        "request_end" => format!("request_end {} {}", s("status"), p["attempt"]),
        "task_end" => format!("task_end {}", s("status")),
        "abort" => format!("abort {}", s("reason")),
        "text" => format!("text {}", s("text")),
        k if k.starts_with("partial") => format!("{k} {}", s("event_type")),
        _ => kind,
    }
}

fn ids(payloads: &[ModelPayload]) -> String {
    let ids: Vec<&str> = payloads
        .iter()
        .map(|p| match p {
            ModelPayload::ToolCallOutput { tool_call_id, .. } => tool_call_id.as_str(),
            ModelPayload::Text { .. } => "text",
            _ => "other",
        })
        .collect();
    ids.join(",")
}

/// The effects as short labels, in order.
fn show(fx: &[Effect]) -> Vec<String> {
    fx.iter()
        .map(|e| match e {
            Effect::Emit(m) => format!("emit {}", label(m)),
            Effect::Stream(m) => format!("stream {}", label(m)),
            Effect::SetCarryOver(c) => format!("carry [{}]", ids(c)),
            Effect::SyncMcp { turn, attempt } => format!("sync_mcp {turn}/{attempt}"),
            Effect::StartStream { turn, input } => format!("start_stream {turn} [{}]", ids(input)),
            Effect::AskApproval {
                turn,
                idx,
                tool_call_id,
                ..
            } => format!("ask {turn}/{idx} {tool_call_id}"),
            Effect::RunCall {
                turn, idx, info, ..
            } => format!("run {turn}/{idx} {}", info.tool_call_id),
            Effect::RequestCompleted(_) => "request_completed".into(),
            Effect::Commit(p) => format!("commit {}", p.len()),
            Effect::CancelTools => "cancel_tools".into(),
            Effect::StopBackground => "stop".into(),
            Effect::RetryAfter { turn, wait_ms } => format!("retry_after {turn} {wait_ms}"),
            Effect::NewAttempt => "new_attempt".into(),
            Effect::NextRequest(p) => format!("next_request [{}]", ids(p)),
            Effect::AbortCompaction(r) => format!("abort_compaction {r}"),
            Effect::EndTask { summary, .. } => format!(
                "end {} {}",
                summary.status,
                summary.abort_reason.as_deref().unwrap_or("-")
            ),
            Effect::OpenTask => "open_task".into(),
            Effect::ReplaceContext => "replace_context".into(),
            Effect::Rollback(n) => format!("rollback {n}"),
            Effect::QueueSteer(p) => format!("queue_steer [{}]", ids(std::slice::from_ref(p))),
            Effect::QueueNotice(p) => format!("queue_notice [{}]", ids(std::slice::from_ref(p))),
            Effect::CheckStop {
                turn,
                active,
                allowed,
            } => format!("check_stop {turn} {active} {allowed}"),
        })
        .collect()
}

#[test]
fn a_request_begins_with_the_turn_input() {
    let mut f = Fixture::new();
    let fx = f.m().start(vec![user("hi")]);
    assert_eq!(show(&fx), ["emit request_begin", "start_stream 1 [text]"]);
    assert_eq!(f.next_id, 2);
    assert_eq!(f.turn().attempt, 1);
}

#[test]
fn max_turns_stops_before_the_first_attempt() {
    let mut f = Fixture::new();
    f.max_turns = 2;
    f.turns = 2;
    let fx = f.m().start(vec![user("hi")]);
    assert_eq!(
        show(&fx),
        [
            "carry [text]",
            "stream partial_text start",
            "stream partial_text delta",
            "stream partial_text stop",
            "emit text [reached max turns (2); stopping]",
            "emit task_end failed",
            "end failed -",
        ]
    );
    assert!(f.task.is_none(), "the task ended");
}

#[test]
fn mcp_servers_hold_the_request_until_their_lists_are_synced() {
    let mut f = Fixture::new();
    f.mcp_servers = true;
    assert_eq!(show(&f.m().start(vec![user("hi")])), ["sync_mcp 1/1"]);
    f.mcp_synced = Some((1, 1));
    assert_eq!(
        show(&f.m().begin_request()),
        ["emit request_begin", "start_stream 1 [text]"]
    );
}

#[test]
fn model_events_stream_partials_and_record_completes() {
    let mut f = Fixture::with_calls(0, false);
    let partial = ModelEvent::Partial(ModelPayload::PartialText {
        role: Role::Assistant,
        event_type: crate::message::EventType::Delta,
        text: "he".into(),
        stop_reason: StopReason::Completed,
    });
    assert_eq!(
        show(&f.m().on_model_event(1, partial)),
        ["stream partial_text delta"]
    );
    assert_eq!(
        show(&f.m().on_model_event(1, answer("hello"))),
        ["emit text hello"]
    );
    // Events of another turn (an old attempt) are ignored.
    assert!(f.m().on_model_event(7, answer("late")).is_empty());
    assert_eq!(
        f.task
            .as_ref()
            .and_then(|t| t.final_text.clone())
            .as_deref(),
        Some("hello")
    );
}

#[test]
fn an_answer_without_calls_completes_the_task() {
    let mut f = Fixture::with_calls(0, false);
    f.m().on_model_event(1, answer("done"));
    let fx = f
        .m()
        .on_model_event(1, ModelEvent::End(ModelOutcome::completed()));
    assert_eq!(
        show(&fx),
        [
            "request_completed",
            "commit 1",
            "emit token_usage",
            "emit request_end completed null",
            "emit task_end completed",
            "end completed -",
        ]
    );
    assert_eq!(f.turns, 1);
    assert!(f.task.is_none());
}

#[test]
fn stop_hooks_are_asked_once_per_turn_and_may_make_the_task_go_on() {
    let mut f = Fixture::with_calls(0, false);
    f.stop_hooks = true;
    let end = || ModelEvent::End(ModelOutcome::completed());
    let fx = f.m().on_model_event(1, end());
    assert_eq!(show(&fx).last().unwrap(), "check_stop 1 false true");
    assert!(show(&f.m().on_notice()).is_empty(), "asked once");
    assert!(f.m().on_stop_checked(7, None).is_empty(), "stale answer");
    let reason = build::user_text("go on", None).as_model().cloned();
    let fx = f.m().on_stop_checked(1, reason);
    assert_eq!(show(&fx), ["next_request [text]"]);
    f.m().next_turn(Vec::new());
    let fx = f.m().on_model_event(2, end());
    // Past the cap (1 here): asked with `allowed` false, then the task ends.
    assert_eq!(show(&fx).last().unwrap(), "check_stop 2 true false");
    let fx = f.m().on_stop_checked(2, None);
    assert_eq!(show(&fx).last().unwrap(), "end completed -");
}

#[test]
fn waiting_input_extends_a_task_without_calls_by_one_request() {
    let mut f = Fixture::with_calls(0, false);
    f.input_waiting = true;
    let fx = f
        .m()
        .on_model_event(1, ModelEvent::End(ModelOutcome::completed()));
    assert_eq!(
        show(&fx).last().map(String::as_str),
        Some("next_request []")
    );
}

#[test]
fn calls_are_approved_one_at_a_time_in_call_order() {
    let mut f = Fixture::with_calls(0, false);
    assert_eq!(
        show(&f.m().on_model_event(1, call("c0"))),
        ["emit tool_call c0", "ask 1/0 c0"]
    );
    // The second waits for the first's verdict.
    assert_eq!(
        show(&f.m().on_model_event(1, call("c1"))),
        ["emit tool_call c1"]
    );
    assert_eq!(
        show(&f.m().on_approved(1, 0, allow())),
        ["emit decision allow c0", "run 1/0 c0", "ask 1/1 c1"]
    );
    assert_eq!(
        show(&f.m().on_approved(1, 1, deny())),
        [
            "emit decision deny c1",
            "emit output c1 aborted Tool call denied by user.",
        ]
    );
    assert_eq!(f.turn().running_tools(), 1);
}

#[test]
fn outputs_in_call_order_make_the_next_request() {
    let mut f = Fixture::with_calls(2, true);
    f.m().on_approved(1, 0, allow());
    f.m().on_approved(1, 1, allow());
    // The second call finishes first: nothing goes on until every call has its output.
    assert_eq!(
        show(&f.m().on_tool_done(1, 1, output("c1", "b"))),
        ["emit output c1 completed b"]
    );
    assert_eq!(
        show(&f.m().on_tool_done(1, 0, output("c0", "a"))),
        ["emit output c0 completed a", "next_request [c0,c1]"]
    );
    // A second output of the same call is ignored.
    assert!(f.m().on_tool_done(1, 0, output("c0", "again")).is_empty());
    let next = vec![f.turn().calls[0].output.clone().expect("an output")];
    assert_eq!(
        show(&f.m().next_turn(next)),
        ["emit request_begin", "start_stream 2 [c0]"]
    );
}

#[test]
fn a_retryable_error_retries_within_the_reconnect_budget() {
    let mut f = Fixture::with_calls(0, false);
    let mut outcome = ModelOutcome::error(StopReason::Timeout, "slow");
    outcome.retry_after_ms = Some(50);
    let fx = f.m().on_model_event(1, ModelEvent::End(outcome));
    // The wait is the longer of the server's and the backoff (100 ms for the first retry).
    assert_eq!(
        show(&fx),
        [
            "cancel_tools",
            "retry_after 1 100",
            "emit request_end timeout 1"
        ]
    );
    assert!(f.turn().in_backoff);
    let fx = f.m().on_retry_now(1);
    assert_eq!(
        show(&fx),
        ["new_attempt", "emit request_begin", "start_stream 2 [text]"]
    );
    assert_eq!((f.turn().id, f.turn().attempt), (2, 2));
    // The first attempt's late events are ignored.
    assert!(f.m().on_model_event(1, answer("late")).is_empty());
}

#[test]
fn a_retry_settles_the_open_calls_of_the_failed_attempt() {
    let mut f = Fixture::with_calls(2, false);
    f.m().on_approved(1, 0, allow());
    f.m().on_model_event(1, failed(StopReason::Failed, "reset"));
    let fx = f.m().on_retry_now(1);
    assert_eq!(
        show(&fx),
        [
            "emit output c0 aborted [interrupted: tool aborted by user]",
            "emit decision deny c1",
            "emit output c1 aborted Tool call denied by user.",
            "new_attempt",
            "emit request_begin",
            "start_stream 2 [text,text]",
        ]
    );
    assert!(f.turn().calls.is_empty());
}

#[test]
fn a_retry_during_a_pending_approval_asks_again_in_the_new_attempt() {
    // c1 is being decided when the stream fails; the retried attempt's call is still asked.
    let mut f = Fixture::with_calls(2, false);
    f.m().on_approved(1, 0, allow());
    f.m().on_model_event(1, failed(StopReason::Failed, "reset"));
    f.m().on_retry_now(1);
    assert_eq!(
        show(&f.m().on_model_event(2, call("d0"))),
        ["emit tool_call d0", "ask 2/0 d0"]
    );
    // The old attempt's verdict, arriving late, changes nothing.
    assert!(f.m().on_approved(1, 1, allow()).is_empty());
}

#[test]
fn a_spent_reconnect_budget_fails_the_task() {
    let mut f = Fixture::with_calls(0, false);
    f.retry.max_retries = 1;
    f.m().on_model_event(1, failed(StopReason::Timeout, "slow"));
    f.m().on_retry_now(1);
    let fx = f.m().on_model_event(2, failed(StopReason::Timeout, "slow"));
    assert_eq!(
        show(&fx),
        [
            "stop",
            "carry [text]",
            "emit request_end timeout 2",
            "emit abort reconnect failed after 1 retries",
            "emit task_end failed",
            "end failed reconnect failed after 1 retries",
        ]
    );
}

#[test]
fn a_permanent_error_fails_at_once() {
    let mut f = Fixture::with_calls(0, false);
    let mut outcome = ModelOutcome::error(StopReason::Failed, "bad request");
    outcome.permanent = true;
    let fx = f.m().on_model_event(1, ModelEvent::End(outcome));
    assert_eq!(
        show(&fx),
        [
            "stop",
            "carry [text]",
            "emit request_end failed 1",
            "emit abort llm request error: bad request",
            "emit task_end failed",
            "end failed llm request error: bad request",
        ]
    );
}

#[test]
fn an_abort_with_calls_running_pairs_every_call_then_ends() {
    let mut f = Fixture::with_calls(2, true);
    f.m().on_approved(1, 0, allow());
    // c1 waits for its approval; c0 runs: the abort waits for c0's report.
    assert_eq!(show(&f.m().abort("aborted by user")), ["stop"]);
    // A second abort changes nothing.
    assert!(f.m().abort("again").is_empty());
    let aborted = build::tool_call_output(
        "c0",
        "[interrupted: tool aborted by user]",
        Vec::new(),
        StopReason::Aborted,
    );
    assert_eq!(
        show(&f.m().on_tool_done(1, 0, aborted)),
        [
            "emit output c0 aborted [interrupted: tool aborted by user]",
            "emit decision deny c1",
            "emit output c1 aborted Tool call denied by user.",
            "carry [c0,c1]",
            "emit abort aborted by user",
            "emit task_end aborted",
            "end aborted aborted by user",
        ]
    );
    assert!(f.task.is_none());
}

#[test]
fn an_abort_of_an_incomplete_stream_flattens_the_request() {
    let mut f = Fixture::with_calls(0, false);
    f.m().on_model_event(1, answer("half"));
    assert_eq!(
        show(&f.m().abort("aborted by user")),
        [
            "stop",
            "carry [text]",
            "emit abort aborted by user",
            "emit task_end aborted",
            "end aborted aborted by user",
        ]
    );
}

#[test]
fn an_abort_in_the_backoff_says_so() {
    let mut f = Fixture::with_calls(0, false);
    f.m().on_model_event(1, failed(StopReason::Timeout, "slow"));
    let fx = f.m().abort("aborted by user");
    assert_eq!(
        show(&fx).last().map(String::as_str),
        Some("end aborted aborted during reconnect backoff")
    );
}

#[test]
fn an_abort_while_compacting_goes_to_the_compaction() {
    let mut f = Fixture::with_calls(0, false);
    f.compacting = true;
    assert_eq!(
        show(&f.m().abort("session closed")),
        ["abort_compaction session closed"]
    );
}

#[test]
fn session_close_finishes_an_abort_with_tools_still_running() {
    let mut f = Fixture::with_calls(1, true);
    f.m().on_approved(1, 0, allow());
    assert_eq!(show(&f.m().abort("session closed")), ["stop"]);
    assert_eq!(
        show(&f.m().force_finish_abort()),
        [
            "emit output c0 aborted [interrupted: tool aborted by user]",
            "carry [c0]",
            "emit abort session closed",
            "emit task_end aborted",
            "end aborted session closed",
        ]
    );
}

#[test]
fn a_trace_failure_fails_the_task_through_the_abort_path() {
    let mut f = Fixture::with_calls(0, false);
    let reason = "trace write failed: disk full (t.jsonl)";
    assert_eq!(
        show(&f.m().fail(reason)),
        [
            "stop",
            "carry [text]",
            format!("emit abort {reason}").as_str(),
            "emit task_end failed",
            format!("end failed {reason}").as_str(),
        ]
    );
}

#[test]
fn a_task_that_lost_a_record_does_not_complete() {
    let mut f = Fixture::with_calls(0, false);
    f.trace_failure = Some("trace write failed: x".into());
    let fx = f
        .m()
        .on_model_event(1, ModelEvent::End(ModelOutcome::completed()));
    assert_eq!(
        show(&fx)[4..],
        [
            "emit abort trace write failed: x",
            "emit task_end failed",
            "end failed trace write failed: x",
        ]
    );
}

#[test]
fn a_notice_continues_a_finished_turn_only_while_running() {
    let mut f = Fixture::with_calls(1, true);
    f.m().on_approved(1, 0, allow());
    f.input_waiting = true;
    // The call still runs: the notice waits for it.
    assert!(f.m().on_notice().is_empty());
    assert_eq!(
        show(&f.m().on_tool_done(1, 0, output("c0", "a"))),
        ["emit output c0 completed a", "next_request [c0]"]
    );
    let mut idle = Fixture::new();
    assert!(idle.m().on_notice().is_empty());
}

#[test]
fn a_panic_settles_the_open_calls() {
    let mut f = Fixture::with_calls(1, false);
    assert_eq!(
        show(&f.m().settle_after_panic()),
        [
            "stop",
            "emit decision deny c0",
            "emit output c0 aborted Tool call denied by user.",
        ]
    );
}
