//! `fork_turns` across a resume and after a compaction, with scripted parents and children: the
//! turns a resumed parent completed before its resume are copied, and after a compaction the
//! copy is the summary and the turns since (`all`, N of them, N larger than that = all).

use crate::common;

use std::time::Duration;

use common::*;
use rookery::Host;
use rookery::message::{ModelPayload, Role, StopReason};
use rookery::tools::profile::ToolProfile;
use serde_json::{Value, json};

fn vaala(
    ws: &std::path::Path,
    model: std::sync::Arc<dyn rookery::Model>,
) -> rookery::SessionOptions {
    let mut o = options(ws, model);
    o.config.set_profile(ToolProfile::OpenVaala).unwrap();
    o
}

fn spawn(message: &str, fork: Value) -> Value {
    json!({"name": "spawn_agent", "arguments": {"task_name": "f", "message": message, "fork_turns": fork}})
}

fn texts(h: &[ModelPayload]) -> Vec<(Role, String)> {
    h.iter()
        .filter_map(|m| match m {
            ModelPayload::Text { role, text, .. } => Some((*role, text.clone())),
            _ => None,
        })
        .collect()
}

/// The texts of the first request whose last user text is `prompt` (waits for the child).
async fn first_of(model: &Recording, prompt: &str) -> Vec<(Role, String)> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let found = model.requests().into_iter().find(|h| {
            texts(h)
                .iter()
                .rev()
                .find(|(r, _)| *r == Role::User)
                .is_some_and(|(_, t)| t == prompt)
        });
        if let Some(h) = found {
            assert_paired(&h);
            return texts(&h);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no request for {prompt}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn turn(u: &str, a: &str) -> Vec<(Role, String)> {
    vec![
        (Role::User, u.to_string()),
        (Role::Assistant, a.to_string()),
    ]
}

fn with_prompt(mut turns: Vec<(Role, String)>, prompt: &str) -> Vec<(Role, String)> {
    turns.push((Role::User, prompt.to_string()));
    turns
}

async fn done(s: &rookery::SessionHandle, prompt: &str, answer: &str) {
    let sum = s.run_task(prompt).await.unwrap();
    assert_eq!(sum.status, StopReason::Completed, "{sum:?}");
    assert_eq!(sum.final_text.as_deref(), Some(answer));
}

const CHILDREN: &str = "fork-";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_turns_after_a_resume_copies_the_turns_completed_before_it() {
    let (_d, ws, home) = tempdirs();
    let script = json!({
        "turns": [
            {"text": "a1"},
            {"tool_calls": [{"name": "bash", "arguments": {"command": "echo tool-two"}}]},
            {"text": "a2"},
            {"text": "a3"},
            {"tool_calls": [
                spawn("fork-two", json!(2)), spawn("fork-all", json!("all")), spawn("fork-nine", json!(9))]},
            {"text": "spawned"}],
        "children": [{"when_prompt_contains": CHILDREN, "turns": [{"text": "ok"}]}]
    });
    let host = Host::start(&home).await.unwrap();
    let model = Recording::new(scripted(script.clone()));
    let s = host.create_session(vaala(&ws, model)).await.unwrap();
    let id = s.id().to_string();
    done(&s, "task one", "a1").await;
    done(&s, "task two", "a2").await;
    s.close().await.unwrap();
    host.shutdown().await;

    let host = Host::start(&home).await.unwrap();
    let model = Recording::new(scripted(script));
    let s = host
        .resume_session(&id, vaala(&ws, model.clone()))
        .await
        .unwrap();
    done(&s, "task three", "a3").await;
    // Reports may arrive before its last request: its answer is not checked.
    s.run_task("spawn them").await.unwrap();
    let one = turn("task one", "a1");
    let two = [turn("task two", "a2")].concat();
    let three = turn("task three", "a3");
    // Two turns: one from before the resume (with its tool call and output) and one after.
    let got = first_of(&model, "fork-two").await;
    assert_eq!(
        got,
        with_prompt([two.clone(), three.clone()].concat(), "fork-two")
    );
    let all = with_prompt([one, two, three].concat(), "fork-all");
    assert_eq!(first_of(&model, "fork-all").await, all);
    assert_eq!(
        first_of(&model, "fork-nine").await,
        with_prompt(all[..all.len() - 1].to_vec(), "fork-nine")
    );
    let child_two = model
        .requests()
        .into_iter()
        .find(|h| texts(h).last().is_some_and(|(_, t)| t == "fork-two"))
        .unwrap();
    assert!(
        outputs(&child_two)
            .iter()
            .any(|(o, _)| o.contains("tool-two")),
        "the forked turn keeps its call and output: {child_two:#?}"
    );
    s.close().await.unwrap();
    host.shutdown().await;
}

const SUMMARY: &str = "[context_summary]\nsaid one and two\n[/context_summary]";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_turns_after_a_compaction_copies_the_summary_and_the_turns_since() {
    let (_d, ws, home) = tempdirs();
    let model = Recording::new(scripted(json!({
        "turns": [
            {"text": "a1"}, {"text": "a2"},
            {"text": "[summary]said one and two[/summary]"},
            {"text": "a3"}, {"text": "a4"},
            {"tool_calls": [
                spawn("fork-one", json!(1)), spawn("fork-two", json!(2)),
                spawn("fork-three", json!(3)), spawn("fork-all", json!("all"))]},
            {"text": "spawned"}],
        "children": [{"when_prompt_contains": CHILDREN, "turns": [{"text": "ok"}]}]
    })));
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(vaala(&ws, model.clone()))
        .await
        .unwrap();
    done(&s, "task one", "a1").await;
    done(&s, "task two", "a2").await;
    s.compact().await.unwrap();
    s.wait_idle().await.unwrap();
    done(&s, "task three", "a3").await;
    done(&s, "task four", "a4").await;
    // Reports may arrive before its last request: its answer is not checked.
    s.run_task("spawn them").await.unwrap();
    let four = turn("task four", "a4");
    let since = [
        vec![(Role::User, SUMMARY.to_string())],
        turn("task three", "a3"),
        four.clone(),
    ]
    .concat();
    assert_eq!(
        first_of(&model, "fork-one").await,
        with_prompt(four, "fork-one")
    );
    // The first turn after the compaction starts with the summary; asking for more turns than
    // the context holds copies all of it; nothing from before the compaction comes back.
    for prompt in ["fork-two", "fork-three", "fork-all"] {
        assert_eq!(
            first_of(&model, prompt).await,
            with_prompt(since.clone(), prompt),
            "{prompt}"
        );
    }
    s.close().await.unwrap();
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_turns_after_a_compaction_and_a_resume_copies_the_rebuilt_turns() {
    let (_d, ws, home) = tempdirs();
    let script = json!({
        "turns": [
            {"text": "a1"}, {"text": "a2"},
            {"text": "[summary]said one and two[/summary]"},
            {"text": "a3"}, {"text": "a4"},
            {"tool_calls": [spawn("fork-one", json!(1)), spawn("fork-all", json!("all"))]},
            {"text": "spawned"}],
        "children": [{"when_prompt_contains": CHILDREN, "turns": [{"text": "ok"}]}]
    });
    let host = Host::start(&home).await.unwrap();
    let s = host
        .create_session(vaala(&ws, Recording::new(scripted(script.clone()))))
        .await
        .unwrap();
    let id = s.id().to_string();
    done(&s, "task one", "a1").await;
    done(&s, "task two", "a2").await;
    s.compact().await.unwrap();
    s.wait_idle().await.unwrap();
    done(&s, "task three", "a3").await;
    s.close().await.unwrap();
    host.shutdown().await;

    let host = Host::start(&home).await.unwrap();
    let model = Recording::new(scripted(script));
    let s = host
        .resume_session(&id, vaala(&ws, model.clone()))
        .await
        .unwrap();
    done(&s, "task four", "a4").await;
    // Reports may arrive before its last request: its answer is not checked.
    s.run_task("spawn them").await.unwrap();
    let four = turn("task four", "a4");
    assert_eq!(
        first_of(&model, "fork-one").await,
        with_prompt(four.clone(), "fork-one")
    );
    let since = [
        vec![(Role::User, SUMMARY.to_string())],
        turn("task three", "a3"),
        four,
    ]
    .concat();
    assert_eq!(
        first_of(&model, "fork-all").await,
        with_prompt(since, "fork-all")
    );
    s.close().await.unwrap();
    host.shutdown().await;
}
