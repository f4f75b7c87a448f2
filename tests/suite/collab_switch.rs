//! `send_message` with `model` / `reasoning_effort`: a scripted parent switches its scripted
//! child to a configured model served by a loopback OpenAI-compatible mock. An idle child's
//! next round, a steered child's next request and a queued message's round run on the new
//! model (the request's `model` and `reasoning_effort`), the history is kept, unknown or
//! unbuildable models are refused with the child unchanged, `list_agents` shows the current
//! model and a resumed child keeps it.

use crate::common;
use crate::common::openai_mock;

use std::time::Duration;

use common::*;
use openai_mock::{Mock, Reply, check_pairing};
use rookery::Host;
use rookery::config::AgentConfig;
use rookery::message::{EventPayload, ModelPayload, OmniMessage, Role, Sender, StopReason};
use rookery::tools::profile::ToolProfile;
use serde_json::{Value, json};

const AGENT: &str = "{{output:0:agent_id: (agent-[0-9a-f]{8})}}";

const TEXT_ANSWER: &str = concat!(
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"child says hi\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
);

fn answer() -> Reply {
    Reply::Sse(vec![TEXT_ANSWER.to_string()])
}

/// `fast` and `big` on the mock; `broken` is a provider without a default endpoint and names none, so its model cannot be built.
fn config(base_url: &str) -> AgentConfig {
    let mut c = AgentConfig::from_yaml(&format!(
        "models:\n  fast:\n    provider: openai\n    base_url: {base_url}\n    model: mini\n    api_key_env: ROOKERY_TEST_UNSET_KEY_VAR\n    context_window: 32000\n  big:\n    provider: openai\n    base_url: {base_url}\n    model: maxi\n    api_key_env: ROOKERY_TEST_UNSET_KEY_VAR\n  broken:\n    provider: localai\n    model: nowhere\n"
    ))
    .unwrap();
    c.retry = fast_retry(0);
    c
}

fn parent(
    ws: &std::path::Path,
    model: std::sync::Arc<Recording>,
    base_url: &str,
) -> rookery::SessionOptions {
    let mut o = options(ws, model);
    o.config = config(base_url);
    o.config.set_profile(ToolProfile::OpenVaala).unwrap();
    o
}

fn call(name: &str, args: Value) -> Value {
    json!({"name": name, "arguments": args})
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

fn reports(h: &[ModelPayload]) -> Vec<String> {
    h.iter()
        .filter_map(|m| match m {
            ModelPayload::Text {
                role: Role::User,
                text,
                ..
            } if text.starts_with("[agent_report]") => Some(text.clone()),
            _ => None,
        })
        .collect()
}

fn child_trace(home: &std::path::Path) -> (String, Vec<OmniMessage>) {
    for day in std::fs::read_dir(home.join("traces")).unwrap() {
        for f in std::fs::read_dir(day.unwrap().path()).unwrap() {
            let recs = trace_records(f.unwrap().path());
            if let Some(rookery::message::Payload::SessionMeta(m)) =
                recs.first().map(|r| r.payload.clone())
                && m.source.as_deref() == Some("subagent")
            {
                return (m.session_id, recs);
            }
        }
    }
    panic!("no child trace under {}", home.display());
}

/// The texts of every message of an OpenAI request body (a content string, or each text part).
fn contents(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().unwrap() {
        match &m["content"] {
            Value::String(s) => out.push(s.clone()),
            Value::Array(parts) => out.extend(
                parts
                    .iter()
                    .filter_map(|p| p["text"].as_str().map(str::to_string)),
            ),
            _ => {}
        }
    }
    out
}

fn position(list: &[String], pred: impl Fn(&str) -> bool) -> usize {
    list.iter()
        .position(|t| pred(t))
        .unwrap_or_else(|| panic!("not found in {list:#?}"))
}

async fn run_parent(host: &Host, o: rookery::SessionOptions) -> rookery::SessionHandle {
    let s = host.create_session(o).await.unwrap();
    let summary = tokio::time::timeout(Duration::from_secs(60), s.run_task("go"))
        .await
        .expect("task in time")
        .unwrap();
    assert_eq!(summary.status, StopReason::Completed, "{summary:?}");
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_agent_switched_by_send_message_runs_its_next_round_on_the_model_and_keeps_it_on_resume()
 {
    let mock = Mock::start(vec![answer(), answer()], None).await;
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({
        "turns": [
            {"tool_calls": [call("spawn_agent", json!({"task_name": "w", "message": "child-switch first"}))]},
            {"tool_calls": [call("wait_agent", json!({"timeout_seconds": 30}))]},
            {"tool_calls": [call("send_message", json!({"target": AGENT, "message": "round two please", "model": "fast", "reasoning_effort": "high"}))]},
            {"tool_calls": [call("wait_agent", json!({"timeout_seconds": 30}))]},
            {"tool_calls": [
                call("send_message", json!({"target": AGENT, "message": "z", "model": "huge"})),
                call("send_message", json!({"target": AGENT, "message": "z", "model": "broken"})),
                call("send_message", json!({"target": AGENT, "message": "z", "reasoning_effort": "LOUD"}))]},
            {"tool_calls": [call("list_agents", json!({}))]},
            {"text": "done"}],
        "children": [{"when_prompt_contains": "child-switch", "turns": [{"text": "round one"}]}]
    })));
    let host = Host::start(&home).await.unwrap();
    let s = run_parent(&host, parent(&ws, model.clone(), &mock.base_url)).await;
    let parents = parent_requests(&model);
    let out = |i: usize| outputs(&parents[i]);
    let sent = &out(3)[2].0;
    assert!(
        sent.starts_with("agent-")
            && sent.contains("was idle: the message started its next round")
            && sent.ends_with("\nmodel: openai/mini (its next round runs on it)"),
        "{sent}"
    );
    let all = reports(&parents[4]);
    assert_eq!(all.len(), 2, "{all:#?}");
    assert!(all[0].ends_with("round one") && all[1].ends_with("child says hi"));
    let refused = &out(5)[4..7];
    assert!(
        refused[0].0.starts_with("[send_message error: unknown model \"huge\" (configured models: big (openai/maxi), broken (localai/nowhere), fast (openai/mini); or give provider/model of one of them); agent-")
            && refused[0].0.ends_with(" keeps its model and the message was not sent]"),
        "{refused:?}"
    );
    assert!(
        refused[1]
            .0
            .starts_with("[send_message error: cannot build model \"broken\": "),
        "{refused:?}"
    );
    assert_eq!(
        refused[2].0,
        "[send_message error: reasoning_effort must be a word such as low, medium or high (got \"LOUD\")]"
    );
    assert!(refused.iter().all(|(_, st)| *st == StopReason::Failed));
    let listed = &out(6)[7].0;
    assert!(
        listed.contains("status: idle")
            && listed.contains("model: openai/mini rounds: 2")
            && listed.contains("context_window: 32000"),
        "{listed}"
    );
    // The child's second round went to the mock with the switched model and its whole history.
    let bodies = mock.requests();
    assert_eq!(bodies.len(), 1, "refused switches start nothing");
    assert_eq!(bodies[0]["model"], "mini");
    assert_eq!(bodies[0]["reasoning_effort"], "high");
    let c = contents(&bodies[0]);
    let first = position(&c, |t| t == "child-switch first");
    let one = position(&c, |t| t == "round one");
    let two = position(&c, |t| t == "round two please");
    assert!(first < one && one < two, "{c:#?}");
    mock.assert_clean();
    s.close().await.unwrap();
    host.shutdown().await;

    // The child's trace records the switch before its second round's request.
    let (child_id, recs) = child_trace(&home);
    let switch = recs
        .iter()
        .position(|r| {
            matches!(r.as_event(), Some(EventPayload::ModelSwitched { model, model_id, reasoning_effort, .. })
                if model == "fast" && model_id == "mini" && reasoning_effort.as_deref() == Some("high"))
        })
        .expect("a model_switched record");
    let begins: Vec<usize> = recs
        .iter()
        .enumerate()
        .filter(|(_, r)| matches!(r.as_event(), Some(EventPayload::RequestBegin {})))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(begins.len(), 2);
    assert!(begins[0] < switch && switch < begins[1]);

    // Resumed with the parent's scripted model, the child goes on with the switched one.
    let host = Host::start(&home).await.unwrap();
    let mut o = options(
        &ws,
        scripted(json!({"turns": [{"text": "scripted, wrong"}]})),
    );
    o.config = config(&mock.base_url);
    let child = host.resume_session(&child_id, o).await.unwrap();
    let summary = child.run_task("after resume").await.unwrap();
    assert_eq!(summary.final_text.as_deref(), Some("child says hi"));
    let bodies = mock.requests();
    assert_eq!(bodies.len(), 2);
    assert_eq!(
        (&bodies[1]["model"], &bodies[1]["reasoning_effort"]),
        (&json!("mini"), &json!("high"))
    );
    let c = contents(&bodies[1]);
    let two = position(&c, |t| t == "round two please");
    let hi = position(&c, |t| t == "child says hi");
    let after = position(&c, |t| t == "after resume");
    assert!(position(&c, |t| t == "round one") < two && two < hi && hi < after);
    mock.assert_clean();
    child.close().await.unwrap();
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steer_with_a_model_switches_the_next_request_of_the_running_round() {
    let mock = Mock::start(vec![answer()], None).await;
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({
        "turns": [
            {"tool_calls": [call("spawn_agent", json!({"task_name": "s", "message": "child-steer"}))]},
            {"tool_calls": [call("bash", json!({"command": "while [ ! -f started ]; do sleep 0.05; done", "wait_seconds": 60}))]},
            {"tool_calls": [call("send_message", json!({"target": AGENT, "message": "finish on the fast model", "mode": "steer", "model": "fast", "reasoning_effort": "low"}))]},
            {"tool_calls": [call("bash", json!({"command": "touch go", "wait_seconds": 30}))]},
            {"tool_calls": [call("wait_agent", json!({"timeout_seconds": 30}))]},
            {"text": "parent done"}],
        "children": [{"when_prompt_contains": "child-steer", "turns": [
            {"tool_calls": [blocked_bash("started")]}, {"text": "scripted answer"}]}]
    })));
    let host = Host::start(&home).await.unwrap();
    let s = run_parent(&host, parent(&ws, model.clone(), &mock.base_url)).await;
    let parents = parent_requests(&model);
    let steered = &outputs(&parents[3])[2].0;
    assert!(
        steered.starts_with("steered agent-")
            && steered
                .ends_with("\nmodel: openai/mini (from the next request of its current round)"),
        "{steered}"
    );
    let all = reports(parents.last().unwrap());
    assert_eq!(all.len(), 1, "{all:#?}");
    assert!(
        all[0].contains("round: 1\nstatus: completed") && all[0].ends_with("child says hi"),
        "{all:#?}"
    );
    let bodies = mock.requests();
    assert_eq!(bodies.len(), 1);
    assert_eq!(
        (&bodies[0]["model"], &bodies[0]["reasoning_effort"]),
        (&json!("mini"), &json!("low"))
    );
    // The call the scripted model made keeps its id and its output, then the steer follows.
    check_pairing(&bodies[0]).unwrap();
    let messages = bodies[0]["messages"].as_array().unwrap();
    let call_id = messages
        .iter()
        .find_map(|m| m["tool_calls"][0]["id"].as_str())
        .expect("the scripted call in the history");
    assert!(
        messages.iter().any(|m| m["role"] == "tool"
            && m["tool_call_id"] == call_id
            && m["content"]
                .as_str()
                .is_some_and(|c| c.contains("released"))),
        "{messages:#?}"
    );
    let c = contents(&bodies[0]);
    assert_eq!(
        c.last().map(String::as_str),
        Some("[user_steering]\nfinish on the fast model\n[/user_steering]")
    );
    mock.assert_clean();
    s.close().await.unwrap();
    let (_, recs) = child_trace(&home);
    let ends = recs
        .iter()
        .filter(|r| matches!(r.as_event(), Some(EventPayload::TaskEnd { .. })))
        .count();
    assert_eq!(ends, 1, "the switch stays in the same round");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_message_with_a_model_runs_its_round_on_it_and_the_current_round_is_unchanged() {
    let mock = Mock::start(vec![answer()], None).await;
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({
        "turns": [
            {"tool_calls": [call("spawn_agent", json!({"task_name": "q", "message": "child-queue"}))]},
            {"tool_calls": [call("bash", json!({"command": "while [ ! -f started ]; do sleep 0.05; done", "wait_seconds": 60}))]},
            {"tool_calls": [call("send_message", json!({"target": AGENT, "message": "then this on big", "model": "big"}))]},
            {"tool_calls": [call("bash", json!({"command": "touch go", "wait_seconds": 30}))]},
            {"tool_calls": [call("wait_agent", json!({"timeout_seconds": 30}))]},
            {"tool_calls": [call("wait_agent", json!({"timeout_seconds": 30}))]},
            {"text": "parent done"}],
        "children": [{"when_prompt_contains": "child-queue", "turns": [
            {"tool_calls": [blocked_bash("started")]}, {"text": "first round on the script"}]}]
    })));
    let host = Host::start(&home).await.unwrap();
    let s = run_parent(&host, parent(&ws, model.clone(), &mock.base_url)).await;
    let parents = parent_requests(&model);
    let queued = &outputs(&parents[3])[2].0;
    assert!(
        queued.starts_with("queued for agent-")
            && queued.contains("(position 1)")
            && queued.ends_with("\nmodel: openai/maxi (the queued message's round runs on it)"),
        "{queued}"
    );
    let all = reports(parents.last().unwrap());
    assert_eq!(all.len(), 2, "{all:#?}");
    assert!(all[0].ends_with("first round on the script"), "{all:#?}");
    assert!(all[1].ends_with("child says hi"), "{all:#?}");
    let bodies = mock.requests();
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0]["model"], "maxi");
    assert!(bodies[0].get("reasoning_effort").is_none(), "{}", bodies[0]);
    check_pairing(&bodies[0]).unwrap();
    let c = contents(&bodies[0]);
    assert!(
        position(&c, |t| t == "first round on the script")
            < position(&c, |t| t == "then this on big")
    );
    mock.assert_clean();
    s.close().await.unwrap();
    host.shutdown().await;
}

fn sse_text(text: &str) -> Reply {
    let delta = json!({"id": "c2", "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": null}]});
    let stop = json!({"id": "c2", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    Reply::Sse(vec![format!(
        "data: {delta}\n\ndata: {stop}\n\ndata: [DONE]\n\n"
    )])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_survives_a_compaction_s_rotation_and_the_resume_that_reads_the_new_file() {
    use rookery::actors::session::model_switch::ModelChoice;
    let mock = Mock::start(
        vec![
            sse_text("on fast"),
            sse_text("[summary]it said on fast[/summary]"),
            sse_text("after resume"),
        ],
        None,
    )
    .await;
    let (_d, ws, home) = tempdirs();
    let mut o = options(
        &ws,
        scripted(json!({"turns": [{"text": "scripted, wrong"}]})),
    );
    o.config = config(&mock.base_url);
    let host = Host::start(&home).await.unwrap();
    let s = host.create_session(o).await.unwrap();
    let id = s.id().to_string();
    let unknown = s
        .switch_model(
            ModelChoice {
                model: Some("huge".into()),
                reasoning_effort: None,
            },
            true,
        )
        .await
        .unwrap_err();
    assert!(
        unknown.to_string().starts_with("unknown model \"huge\""),
        "{unknown}"
    );
    let switched = s
        .switch_model(
            ModelChoice {
                model: Some("openai/mini".into()),
                reasoning_effort: Some("medium".into()),
            },
            true,
        )
        .await
        .unwrap();
    assert!(switched.changed);
    assert_eq!(switched.info.model_id, "mini");
    assert_eq!(
        s.run_task("first").await.unwrap().final_text.as_deref(),
        Some("on fast")
    );
    s.compact().await.unwrap();
    s.wait_idle().await.unwrap();
    s.close().await.unwrap();
    host.shutdown().await;
    // The second file (after the rotation) repeats the switch after its header.
    let second =
        rookery::trace::paths::trace_path(&home, &id).with_file_name(format!("{id}_002.jsonl"));
    let recs = trace_records(&second);
    assert!(
        recs.iter().take(4).any(|r| matches!(r.as_event(), Some(EventPayload::ModelSwitched { model, .. }) if model == "openai/mini")),
        "{:#?}",
        kinds(&recs)
    );

    let host = Host::start(&home).await.unwrap();
    let mut o = options(
        &ws,
        scripted(json!({"turns": [{"text": "scripted, wrong"}]})),
    );
    o.config = config(&mock.base_url);
    let s = host.resume_session(&id, o).await.unwrap();
    assert_eq!(
        s.run_task("again").await.unwrap().final_text.as_deref(),
        Some("after resume")
    );
    let bodies = mock.requests();
    assert_eq!(bodies.len(), 3);
    for b in &bodies {
        assert_eq!(
            (&b["model"], &b["reasoning_effort"]),
            (&json!("mini"), &json!("medium"))
        );
    }
    let c = contents(&bodies[2]);
    assert_eq!(
        c[1..],
        [
            "[context_summary]\nit said on fast\n[/context_summary]",
            "again"
        ],
        "the resumed context is the summary, then the prompt"
    );
    mock.assert_clean();
    s.close().await.unwrap();
    host.shutdown().await;
}

fn sse_call(id: &str, name: &str, arguments: &str) -> Reply {
    let open = json!({"id": "c3", "choices": [{"index": 0, "delta": {"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}, "finish_reason": null}]});
    let args = json!({"id": "c3", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]}, "finish_reason": null}]});
    let stop =
        json!({"id": "c3", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
    Reply::Sse(vec![format!(
        "data: {open}\n\ndata: {args}\n\ndata: {stop}\n\ndata: [DONE]\n\n"
    )])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_id_the_new_model_repeats_stays_unique_in_the_agent_s_history() {
    let mock = Mock::start(
        vec![
            sse_call("call_0", "bash", "{\"command\":\"echo second\"}"),
            answer(),
        ],
        None,
    )
    .await;
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({
        "turns": [
            {"tool_calls": [call("spawn_agent", json!({"task_name": "i", "message": "child-ids"}))]},
            {"tool_calls": [call("wait_agent", json!({"timeout_seconds": 30}))]},
            {"tool_calls": [call("send_message", json!({"target": AGENT, "message": "again on fast", "model": "fast"}))]},
            {"tool_calls": [call("wait_agent", json!({"timeout_seconds": 30}))]},
            {"text": "done"}],
        "children": [{"when_prompt_contains": "child-ids", "turns": [
            {"tool_calls": [call("bash", json!({"command": "echo first"}))]}, {"text": "round one"}]}]
    })));
    let host = Host::start(&home).await.unwrap();
    let s = run_parent(&host, parent(&ws, model.clone(), &mock.base_url)).await;
    let all = reports(parent_requests(&model).last().unwrap());
    assert_eq!(all.len(), 2, "{all:#?}");
    assert!(all[1].ends_with("child says hi"), "{all:#?}");
    s.close().await.unwrap();
    host.shutdown().await;
    let (_, recs) = child_trace(&home);
    let calls: Vec<String> = recs
        .iter()
        .filter_map(|r| match r.as_model() {
            Some(ModelPayload::ToolCall { tool_call_id, .. }) => Some(tool_call_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(calls, ["call_0", "call_0#2"]);
    for id in &calls {
        let outs = recs
            .iter()
            .filter(|r| matches!(r.as_model(), Some(ModelPayload::ToolCallOutput { tool_call_id, .. }) if tool_call_id == id))
            .count();
        assert_eq!(outs, 1, "{id}");
    }
    let bodies = mock.requests();
    assert_eq!(bodies.len(), 2);
    check_pairing(&bodies[1]).unwrap();
    mock.assert_clean();
}
