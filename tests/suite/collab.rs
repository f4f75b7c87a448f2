//! The collaboration tools of the openvaala profile with scripted parents and children:
//! spawn + per-round reports, fork_turns, steering a running child, queued messages,
//! wait_agent's wake-ups and timeout, interrupt pairing, history paging, and the 8-agent cap
//! under parallel spawns.

use crate::common;

use std::time::Duration;

use common::*;
use rookery::Host;
use rookery::message::{EventPayload, ModelPayload, OmniMessage, Role, Sender, StopReason};
use rookery::tools::profile::ToolProfile;
use serde_json::{Value, json};

const AGENT: &str = "{{output:0:agent_id: (agent-[0-9a-f]{8})}}";

fn vaala(
    ws: &std::path::Path,
    model: std::sync::Arc<dyn rookery::Model>,
) -> rookery::SessionOptions {
    let mut o = options(ws, model);
    o.config.set_profile(ToolProfile::OpenVaala).unwrap();
    o
}

fn call(name: &str, args: Value) -> Value {
    json!({"name": name, "arguments": args})
}

fn spawn(task: &str, message: &str, extra: Value) -> Value {
    let mut a = json!({"task_name": task, "message": message});
    if let (Some(a), Some(e)) = (a.as_object_mut(), extra.as_object()) {
        a.extend(e.clone());
    }
    call("spawn_agent", a)
}

fn blocked_bash(flag: &str) -> Value {
    call(
        "bash",
        json!({"wait_seconds": 60, "command": format!("touch {flag}; while [ ! -f go ]; do sleep 0.05; done; echo released")}),
    )
}

fn is_child(h: &[ModelPayload]) -> bool {
    h.iter().any(|m| {
        matches!(
            m,
            ModelPayload::Text {
                sender: Some(Sender::ParentAgent),
                ..
            }
        )
    })
}

fn parent_requests(model: &Recording) -> Vec<Vec<ModelPayload>> {
    model
        .requests()
        .into_iter()
        .filter(|h| !is_child(h))
        .collect()
}

fn texts(h: &[ModelPayload], role: Role) -> Vec<String> {
    h.iter()
        .filter_map(|m| match m {
            ModelPayload::Text { role: r, text, .. } if *r == role => Some(text.clone()),
            _ => None,
        })
        .collect()
}

fn reports(h: &[ModelPayload]) -> Vec<String> {
    texts(h, Role::User)
        .into_iter()
        .filter(|t| t.starts_with("[agent_report]"))
        .collect()
}

fn child_traces(home: &std::path::Path) -> Vec<Vec<OmniMessage>> {
    let mut out = Vec::new();
    for day in std::fs::read_dir(home.join("traces")).unwrap() {
        for f in std::fs::read_dir(day.unwrap().path()).unwrap() {
            let recs = trace_records(f.unwrap().path());
            let is_child = matches!(&recs.first().map(|r| r.payload.clone()),
                Some(rookery::message::Payload::SessionMeta(m)) if m.source.as_deref() == Some("subagent"));
            if is_child {
                out.push(recs);
            }
        }
    }
    out
}

async fn run(
    host: &Host,
    ws: &std::path::Path,
    model: std::sync::Arc<Recording>,
    prompt: &str,
) -> rookery::SessionHandle {
    let s = host.create_session(vaala(ws, model)).await.unwrap();
    let summary = tokio::time::timeout(Duration::from_secs(60), s.run_task(prompt))
        .await
        .expect("task in time")
        .unwrap();
    assert_eq!(summary.status, StopReason::Completed, "{summary:?}");
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_returns_an_agent_id_and_each_round_reports_to_the_parent() {
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({
        "turns": [
            {"tool_calls": [spawn("lint", "child-lint: check the notes", json!({}))]},
            {"tool_calls": [call("wait_agent", json!({"timeout_seconds": 30}))]},
            {"tool_calls": [call("send_message", json!({"target": AGENT, "message": "child-lint again"}))]},
            {"tool_calls": [call("wait_agent", json!({"timeout_seconds": 30}))]},
            {"text": "parent done"}],
        "children": [{"when_prompt_contains": "child-lint", "turns": [
            {"text": "lint clean", "delay_ms": 1500}, {"text": "still clean", "delay_ms": 500}]}]
    })));
    let host = Host::start(&home).await.unwrap();
    let s = run(&host, &ws, model.clone(), "go").await;
    let parents = parent_requests(&model);
    let out = &outputs(&parents[1])[0].0;
    let re = regex::Regex::new(r"^agent_id: agent-[0-9a-f]{8}\n").unwrap();
    assert!(re.is_match(out), "{out}");
    let id = &out[10..24];
    let all: Vec<String> = parents.iter().flat_map(|h| reports(h)).collect();
    let last = parents.last().unwrap();
    let got = reports(last);
    assert_eq!(got.len(), 2, "{all:#?}");
    assert!(got[0].contains(&format!(
        "agent_id: {id}\ntask_name: lint\nround: 1\nstatus: completed"
    )));
    assert!(got[0].ends_with("lint clean"));
    assert!(got[1].contains("round: 2") && got[1].ends_with("still clean"));
    // The reports are user texts of the parent's trace.
    s.close().await.unwrap();
    let recs = trace_records(s.trace_path());
    let traced = recs
        .iter()
        .filter(|r| matches!(r.as_model(), Some(ModelPayload::Text { role: Role::User, text, .. }) if text.starts_with("[agent_report]")))
        .count();
    assert_eq!(traced, 2);
    assert_eq!(
        recs.iter()
            .filter(|r| matches!(r.as_event(), Some(EventPayload::Subagent { .. })))
            .count(),
        1
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_turns_none_all_and_two_copy_exactly_those_turns() {
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({
        "turns": [
            {"text": "a1"}, {"text": "a2"}, {"text": "a3"},
            {"tool_calls": [
                spawn("n", "fork-none", json!({"fork_turns": "none"})),
                spawn("a", "fork-all", json!({"fork_turns": "all"})),
                spawn("t", "fork-two", json!({"fork_turns": 2}))]},
            {"text": "spawned"}],
        "children": [{"when_prompt_contains": "fork-", "turns": [{"text": "ok"}]}]
    })));
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(vaala(&ws, model.clone()))
        .await
        .unwrap();
    for (p, a) in [("task one", "a1"), ("task two", "a2"), ("task three", "a3")] {
        let sum = s.run_task(p).await.unwrap();
        assert_eq!(sum.final_text.as_deref(), Some(a));
    }
    s.run_task("spawn them").await.unwrap();
    // The agents run in the background: wait until each has made its first request.
    let asked = |prompt: &str| {
        model
            .requests()
            .iter()
            .any(|h| texts(h, Role::User).last().map(String::as_str) == Some(prompt))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !["fork-none", "fork-all", "fork-two"]
        .iter()
        .all(|p| asked(p))
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let first_of = |prompt: &str| -> Vec<(Role, String)> {
        let h = model
            .requests()
            .into_iter()
            .find(|h| texts(h, Role::User).last().map(String::as_str) == Some(prompt))
            .unwrap_or_else(|| panic!("no request for {prompt}"));
        h.iter()
            .filter_map(|m| match m {
                ModelPayload::Text { role, text, .. } => Some((*role, text.clone())),
                _ => None,
            })
            .collect()
    };
    let turn = |u: &str, a: &str| {
        vec![
            (Role::User, u.to_string()),
            (Role::Assistant, a.to_string()),
        ]
    };
    assert_eq!(
        first_of("fork-none"),
        vec![(Role::User, "fork-none".to_string())]
    );
    let mut all = [
        turn("task one", "a1"),
        turn("task two", "a2"),
        turn("task three", "a3"),
    ]
    .concat();
    all.push((Role::User, "fork-all".into()));
    assert_eq!(first_of("fork-all"), all);
    let mut two = [turn("task two", "a2"), turn("task three", "a3")].concat();
    two.push((Role::User, "fork-two".into()));
    assert_eq!(first_of("fork-two"), two);
    // The copy is in the child's trace, so the child resumes with it.
    s.close().await.unwrap();
    let forked = child_traces(&home)
        .into_iter()
        .filter(|t| {
            t.iter()
                .any(|r| matches!(r.as_event(), Some(EventPayload::ForkedHistory { .. })))
        })
        .count();
    assert_eq!(forked, 2);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steer_into_a_running_child_lands_in_the_same_round() {
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({
        "turns": [
            {"tool_calls": [spawn("s", "child-steer", json!({}))]},
            {"tool_calls": [call("bash", json!({"command": "while [ ! -f started ]; do sleep 0.05; done", "wait_seconds": 60}))]},
            {"tool_calls": [call("send_message", json!({"target": AGENT, "message": "also check b", "mode": "steer"}))]},
            {"tool_calls": [call("bash", json!({"command": "touch go", "wait_seconds": 30}))]},
            {"tool_calls": [call("wait_agent", json!({"timeout_seconds": 30}))]},
            {"text": "parent done"}],
        "children": [{"when_prompt_contains": "child-steer", "turns": [
            {"tool_calls": [blocked_bash("started")]}, {"text": "child done"}]}]
    })));
    let host = Host::start(&home).await.unwrap();
    let s = run(&host, &ws, model.clone(), "go").await;
    let parents = parent_requests(&model);
    assert!(
        outputs(&parents[3])[2].0.starts_with("steered agent-"),
        "{:?}",
        outputs(&parents[3])
    );
    s.close().await.unwrap();
    let child = child_traces(&home).pop().unwrap();
    let steer = "[user_steering]\nalso check b\n[/user_steering]";
    let pos = |pred: &dyn Fn(&OmniMessage) -> bool| -> Vec<usize> {
        child
            .iter()
            .enumerate()
            .filter(|(_, r)| pred(r))
            .map(|(i, _)| i)
            .collect()
    };
    let steers =
        pos(&|r| matches!(r.as_model(), Some(ModelPayload::Text { text, .. }) if text == steer));
    let begins = pos(&|r| matches!(r.as_event(), Some(EventPayload::RequestBegin {})));
    let ends = pos(&|r| matches!(r.as_event(), Some(EventPayload::TaskEnd { .. })));
    assert_eq!(
        (steers.len(), begins.len(), ends.len()),
        (1, 2, 1),
        "one round, two requests"
    );
    assert!(begins[0] < steers[0] && steers[0] < begins[1]);
    let child_second = model
        .requests()
        .into_iter()
        .filter(|h| is_child(h))
        .nth(1)
        .unwrap();
    assert_eq!(
        texts(&child_second, Role::User).last().map(String::as_str),
        Some(steer)
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_normal_message_queues_while_the_child_is_busy_and_starts_the_next_round() {
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({
        "turns": [
            {"tool_calls": [spawn("q", "child-queue", json!({}))]},
            {"tool_calls": [call("bash", json!({"command": "while [ ! -f started ]; do sleep 0.05; done", "wait_seconds": 60}))]},
            {"tool_calls": [call("send_message", json!({"target": AGENT, "message": "then this"}))]},
            {"tool_calls": [call("bash", json!({"command": "touch go", "wait_seconds": 30}))]},
            {"tool_calls": [call("wait_agent", json!({"timeout_seconds": 30}))]},
            {"tool_calls": [call("wait_agent", json!({"timeout_seconds": 30}))]},
            {"text": "parent done"}],
        "children": [{"when_prompt_contains": "child-queue", "turns": [
            {"tool_calls": [blocked_bash("started")]}, {"text": "first round"}, {"text": "second round"}]}]
    })));
    let host = Host::start(&home).await.unwrap();
    let s = run(&host, &ws, model.clone(), "go").await;
    let parents = parent_requests(&model);
    let sent = &outputs(&parents[3])[2].0;
    assert!(
        sent.starts_with("queued for agent-") && sent.contains("(position 1)"),
        "{sent}"
    );
    let all: Vec<String> = parents.last().map(|h| reports(h)).unwrap();
    assert_eq!(all.len(), 2, "{all:#?}");
    assert!(all[0].ends_with("first round") && all[1].ends_with("second round"));
    s.close().await.unwrap();
    let child = child_traces(&home).pop().unwrap();
    let prompts: Vec<String> = child
        .iter()
        .filter_map(|r| match r.as_model() {
            Some(ModelPayload::Text {
                role: Role::User,
                sender: Some(Sender::ParentAgent),
                text,
                ..
            }) => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(prompts, vec!["child-queue", "then this"]);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_agent_wakes_on_a_message_on_steering_and_times_out() {
    let (_d, ws, home) = tempdirs();
    // A child's message to its parent wakes the parent's wait.
    let model = Recording::new(scripted(json!({
        "turns": [
            {"tool_calls": [spawn("m", "child-msg", json!({}))]},
            {"tool_calls": [call("wait_agent", json!({"timeout_seconds": 30}))]},
            {"text": "parent done"}],
        "children": [{"when_prompt_contains": "child-msg", "turns": [
            {"tool_calls": [call("send_message", json!({"target": "parent", "message": "halfway there"}))], "delay_ms": 1000},
            {"tool_calls": [call("wait_agent", json!({"timeout_seconds": 1}))]},
            {"text": "child done", "delay_ms": 3000}]}]
    })));
    let host = Host::start(&home).await.unwrap();
    let s = run(&host, &ws, model.clone(), "go").await;
    let parents = parent_requests(&model);
    let woke = outputs(&parents[2]).last().unwrap().0.clone();
    assert!(
        woke.starts_with("woke: message from agent agent-"),
        "{woke}"
    );
    let msg = texts(&parents[2], Role::User);
    assert!(msg.iter().any(|t| t.starts_with("[agent_message]\nfrom: agent-") && t.ends_with("halfway there")), "{msg:#?}");
    // The child's own wait timed out (nothing was sent to it).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let child_third = loop {
        if let Some(h) = model.requests().into_iter().filter(|h| is_child(h)).nth(2) {
            break h;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the child's wait never ended"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        outputs(&child_third).last().unwrap().0,
        "timed out after 1 s: no report or message arrived"
    );
    s.close().await.unwrap();

    // The user's steering wakes it too; bad timeouts are errors.
    let model = Recording::new(scripted(json!({"turns": [
        {"tool_calls": [call("wait_agent", json!({"timeout_seconds": 0}))]},
        {"tool_calls": [call("wait_agent", json!({"timeout_seconds": 120}))]},
        {"text": "done"}, {"text": "after"}]})));
    let s = host
        .create_session(vaala(&ws, model.clone()))
        .await
        .unwrap();
    let mut rx = s.subscribe().await.unwrap();
    s.start_task("wait").await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut calls = 0;
    while calls < 2 {
        let m = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .unwrap()
            .unwrap();
        if matches!(m.as_model(), Some(ModelPayload::ToolCall { .. })) {
            calls += 1;
        }
    }
    assert_eq!(
        s.steer("stop waiting").await.unwrap(),
        rookery::SteerOutcome::Queued
    );
    let sum = tokio::time::timeout(Duration::from_secs(30), s.wait_idle())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(sum.status, StopReason::Completed);
    let reqs = model.requests();
    let outs = outputs(&reqs[2]);
    assert!(
        outs[0]
            .0
            .contains("timeout_seconds must be a whole number from 1 to 600"),
        "{outs:?}"
    );
    assert_eq!(outs[0].1, StopReason::Failed);
    assert_eq!(
        outs[1].0,
        "woke: the user steered; it reaches you with your next request"
    );
    s.close().await.unwrap();
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_ends_the_round_pairs_every_call_and_reports_interrupted() {
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({
        "turns": [
            {"tool_calls": [spawn("i", "child-int", json!({}))]},
            {"tool_calls": [call("bash", json!({"command": "while [ ! -f started ]; do sleep 0.05; done", "wait_seconds": 60}))]},
            {"tool_calls": [call("interrupt_agent", json!({"target": AGENT}))]},
            {"tool_calls": [call("interrupt_agent", json!({"target": AGENT})), call("list_agents", json!({}))]},
            {"text": "parent done"}],
        "children": [{"when_prompt_contains": "child-int", "turns": [
            {"tool_calls": [blocked_bash("started")]}, {"text": "unreached"}]}]
    })));
    let host = Host::start(&home).await.unwrap();
    let s = run(&host, &ws, model.clone(), "go").await;
    let parents = parent_requests(&model);
    let outs = outputs(parents.last().unwrap());
    assert!(outs[2].0.starts_with("interrupted agent-"), "{outs:#?}");
    assert!(
        outs[3].0.ends_with("is idle; nothing to interrupt]"),
        "{outs:#?}"
    );
    assert!(outs[4].0.contains("status: interrupted"), "{outs:#?}");
    let rep = reports(parents.last().unwrap());
    assert_eq!(rep.len(), 1);
    assert!(rep[0].contains("status: interrupted"), "{rep:?}");
    s.close().await.unwrap();
    let child = child_traces(&home).pop().unwrap();
    let history: Vec<ModelPayload> = child.iter().filter_map(|r| r.as_model().cloned()).collect();
    assert_paired(&history);
    let aborted = history
        .iter()
        .filter(|m| {
            matches!(
                m,
                ModelPayload::ToolCallOutput {
                    stop_reason: StopReason::Aborted,
                    ..
                }
            )
        })
        .count();
    assert_eq!(aborted, 1);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_pages_newest_first_and_continues_by_cursor() {
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({
        "turns": [
            {"tool_calls": [spawn("h", "child-hist", json!({}))]},
            {"tool_calls": [call("wait_agent", json!({"timeout_seconds": 30}))]},
            {"tool_calls": [call("read_session_history", json!({"target": AGENT, "limit": 3}))]},
            {"tool_calls": [call("read_session_history", json!({"target": AGENT, "limit": 3, "cursor": "{{output:2:next_cursor: (\\d+) \\(pass}}"}))]},
            {"tool_calls": [call("read_session_history", json!({"target": "agent-00000000"}))]},
            {"text": "parent done"}],
        "children": [{"when_prompt_contains": "child-hist", "turns": [
            {"tool_calls": [call("bash", json!({"command": "echo hi", "wait_seconds": 30}))], "delay_ms": 500},
            {"text": "the end"}]}]
    })));
    let host = Host::start(&home).await.unwrap();
    let s = run(&host, &ws, model.clone(), "go").await;
    let outs = outputs(parent_requests(&model).last().unwrap());
    let first: Vec<&str> = outs[2].0.lines().collect();
    assert!(
        first[0].ends_with("history: entries 4 down to 2 of 4, newest first"),
        "{first:?}"
    );
    assert_eq!(first[1], "#4 assistant: the end");
    assert!(first[2].starts_with("#3 tool_output: (completed)"));
    assert!(first[3].starts_with("#2 tool_call: bash "));
    assert_eq!(
        first[4],
        "next_cursor: 1 (pass it as cursor for older entries)"
    );
    let second: Vec<&str> = outs[3].0.lines().collect();
    assert_eq!(&second[1..], &["#1 user: child-hist", "(start of history)"]);
    assert!(
        outs[4]
            .0
            .starts_with("[read_session_history error: unknown target agent-00000000")
    );
    assert_eq!(outs[4].1, StopReason::Failed);
    s.close().await.unwrap();
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nine_parallel_spawn_agents_admit_exactly_eight_every_time() {
    let (_d, ws, home) = tempdirs();
    let host = Host::start(&home).await.unwrap();
    for round in 0..20 {
        let calls: Vec<Value> = (0..9)
            .map(|i| spawn(&format!("t{i}"), &format!("child {i}"), json!({})))
            .collect();
        let model = Recording::new(scripted(json!({
            "turns": [{"tool_calls": calls}, {"text": "done"}],
            "children": [{"when_prompt_contains": "child", "turns": [{"text": "child answer", "delay_ms": 3000}]}]
        })));
        let s = run(&host, &ws, model.clone(), "fan out").await;
        let outs = outputs(&parent_requests(&model)[1]);
        let refused = outs
            .iter()
            .filter(|o| {
                o.0.starts_with("[spawn_agent error: 8 agents are running (the limit)")
            })
            .count();
        let running = outs
            .iter()
            .filter(|o| o.0.starts_with("agent_id: agent-"))
            .count();
        assert_eq!((running, refused), (8, 1), "round {round}: {outs:#?}");
        s.close().await.unwrap();
    }
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_subagent_mode_steer_joins_the_running_round() {
    let (_d, ws, home) = tempdirs();
    let blocked = json!({"name": "exec_command", "arguments": {"description": "w", "yield_time_ms": 60000,
        "cmd": "touch started; while [ ! -f go ]; do sleep 0.05; done; echo released"}});
    let id = "{{output:0:subagent_id (subagent-[0-9a-f]{8})}}";
    let model = Recording::new(scripted(json!({
        "turns": [
            {"tool_calls": [{"name": "run_subagent", "arguments": {"description": "d", "prompt": "child-psteer", "run_in_background": true}}]},
            {"tool_calls": [{"name": "exec_command", "arguments": {"description": "w", "cmd": "while [ ! -f started ]; do sleep 0.05; done"}}]},
            {"tool_calls": [{"name": "input_subagent", "arguments": {"description": "d", "subagent_id": id, "prompt": "look at b", "mode": "steer", "yield_time_ms": 250}}]},
            {"tool_calls": [{"name": "exec_command", "arguments": {"description": "go", "cmd": "touch go"}}]},
            {"tool_calls": [{"name": "input_subagent", "arguments": {"description": "d", "subagent_id": id, "yield_time_ms": 20000}}]},
            {"text": "parent done"}],
        "children": [{"when_prompt_contains": "child-psteer", "turns": [{"tool_calls": [blocked]}, {"text": "child done"}]}]
    })));
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(options(&ws, model.clone()))
        .await
        .unwrap();
    assert_eq!(
        s.run_task("go").await.unwrap().status,
        StopReason::Completed
    );
    let second = model
        .requests()
        .into_iter()
        .filter(|h| is_child(h))
        .nth(1)
        .unwrap();
    assert_eq!(
        texts(&second, Role::User).last().map(String::as_str),
        Some("[user_steering]\nlook at b\n[/user_steering]")
    );
    let outs = outputs(parent_requests(&model).last().unwrap());
    assert!(
        // The child's answer may come first in this output or in its own report, by timing.
        outs[4]
            .0
            .contains("[subagent idle with subagent_id subagent-"),
        "{outs:#?}"
    );
    s.close().await.unwrap();
    let child = child_traces(&home).pop().unwrap();
    let ends = child
        .iter()
        .filter(|r| matches!(r.as_event(), Some(EventPayload::TaskEnd { .. })))
        .count();
    assert_eq!(ends, 1, "the steer joined the running round");
    host.shutdown().await;
}
