//! The replay harness: runs one real session (trace actor, tools, retries) on the
//! OpenAI-compatible client against the replay server, and reads back from the JSONL trace what
//! the first request left: complete texts, thinking, tool calls, usage and its `request_end`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rookery::Host;
use rookery::message::StopReason;
use rookery::model::model_config::ModelConfig;
use rookery::model::openai::OpenAiModel;
use serde_json::Value;

use super::server::{Replay, Script};
use crate::common::{options, tempdirs};

/// An expected text: exact, or (characters, first 30, last 30) for long ones.
#[derive(Debug)]
pub enum Txt {
    Exact(&'static str),
    Long(usize, &'static str, &'static str),
}

impl Txt {
    pub fn matches(&self, got: &str) -> bool {
        match self {
            Txt::Exact(s) => got == *s,
            Txt::Long(n, head, tail) => {
                got.chars().count() == *n && got.starts_with(head) && got.ends_with(tail)
            }
        }
    }
}

/// What one recorded stream must leave in the trace.
#[derive(Debug)]
pub struct Case {
    pub file: &'static str,
    pub status: StopReason,
    /// The start of the request's error message.
    pub error: Option<&'static str>,
    pub texts: &'static [Txt],
    pub thinking: &'static [Txt],
    /// `(name, arguments, tool_call_id)` in order.
    pub calls: &'static [(&'static str, &'static str, &'static str)],
    /// `[cache_read, cache_write, output, total]` of the request (zeros: none reported).
    pub usage: [u64; 4],
}

/// What the first request of a session left in its trace.
#[derive(Debug, Default)]
pub struct Seen {
    pub status: Option<StopReason>,
    pub error: Option<String>,
    pub texts: Vec<String>,
    pub thinking: Vec<String>,
    pub calls: Vec<(String, String, String)>,
    pub usage: Option<[u64; 4]>,
    /// Statuses of every request, in order.
    pub statuses: Vec<String>,
    /// The task's final text.
    pub final_text: Option<String>,
}

/// The files the tool calls of some recordings read.
pub const WORKSPACE_FILES: [(&str, &str); 2] =
    [("a.txt", "alpha-file\n"), ("b.txt", "beta-file\n")];

fn read_seen(trace: impl AsRef<Path>) -> Seen {
    let text = std::fs::read_to_string(trace).unwrap();
    let mut seen = Seen::default();
    let mut requests = 0;
    for line in text.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        let payload = &record["payload"];
        let kind = payload["type"].as_str().unwrap_or("");
        let first = requests == 1 && seen.status.is_none();
        match kind {
            "request_begin" => requests += 1,
            "request_end" => {
                let status = payload["status"].as_str().unwrap_or("?").to_string();
                if first {
                    seen.status = serde_json::from_value(payload["status"].clone()).ok();
                    seen.error = payload["error_message"].as_str().map(str::to_string);
                }
                seen.statuses.push(status);
            }
            "text" if first && payload["role"] == "assistant" => seen
                .texts
                .push(payload["text"].as_str().unwrap().to_string()),
            "thinking" if first => seen
                .thinking
                .push(payload["thinking"].as_str().unwrap().to_string()),
            "tool_call" if first => seen.calls.push((
                payload["name"].as_str().unwrap().to_string(),
                payload["arguments"].as_str().unwrap().to_string(),
                payload["tool_call_id"].as_str().unwrap().to_string(),
            )),
            "token_usage" if first => {
                let r = &payload["request"];
                let n = |k: &str| r[k].as_u64().unwrap_or(0);
                seen.usage = Some([n("cache_read"), n("cache_write"), n("output"), n("total")]);
            }
            _ => {}
        }
    }
    seen
}

/// Runs the task "go" in a fresh session whose model is served `script` (its first request;
/// later requests get a short text). `tweak` adjusts the model config.
pub async fn replay(script: Script, tweak: impl FnOnce(&mut ModelConfig)) -> (Seen, Replay) {
    let replay = Replay::start(script).await;
    let (_dir, ws, home) = tempdirs();
    for (name, text) in WORKSPACE_FILES {
        std::fs::write(ws.join(name), text).unwrap();
    }
    let mut cfg = ModelConfig::openai(&replay.base_url, "replay-model");
    cfg.api_key_env = Some("ROOKERY_REPLAY_UNSET_KEY".into());
    cfg.idle_timeout_ms = Some(30_000);
    tweak(&mut cfg);
    let model = OpenAiModel::new(cfg).unwrap();
    let host = Host::start(&home).await.unwrap();
    let session = host
        .create_session(options(&ws, Arc::new(model)))
        .await
        .unwrap();
    let summary = tokio::time::timeout(Duration::from_secs(120), session.run_task("go"))
        .await
        .expect("the task ends")
        .unwrap();
    session.close().await.unwrap();
    let mut seen = read_seen(session.trace_path());
    seen.final_text = summary.final_text;
    (seen, replay)
}

/// Every difference between what `case` means and what the session did.
pub fn check(case: &Case, seen: &Seen, replay: &Replay) -> Vec<String> {
    let mut bad = Vec::new();
    let mut expect = |ok: bool, what: String| {
        if !ok {
            bad.push(format!("{}: {what}", case.file));
        }
    };
    expect(
        seen.status == Some(case.status),
        format!(
            "status {:?}, expected {:?} ({:?})",
            seen.status, case.status, seen.error
        ),
    );
    expect(
        match case.error {
            Some(prefix) => seen.error.as_deref().is_some_and(|e| e.starts_with(prefix)),
            None => seen.error.is_none(),
        },
        format!("error {:?}, expected {:?}", seen.error, case.error),
    );
    let same = |want: &[Txt], got: &[String]| {
        want.len() == got.len() && want.iter().zip(got).all(|(w, g)| w.matches(g))
    };
    expect(
        same(case.texts, &seen.texts),
        format!("texts {:?}, expected {:?}", seen.texts, case.texts),
    );
    expect(
        same(case.thinking, &seen.thinking),
        format!("thinking {:?}, expected {:?}", seen.thinking, case.thinking),
    );
    let want_calls: Vec<(String, String, String)> = case
        .calls
        .iter()
        .map(|(n, a, i)| (n.to_string(), a.to_string(), i.to_string()))
        .collect();
    expect(
        seen.calls == want_calls,
        format!("calls {:?}, expected {:?}", seen.calls, want_calls),
    );
    if case.status == StopReason::Completed {
        expect(
            seen.usage == Some(case.usage),
            format!("usage {:?}, expected {:?}", seen.usage, case.usage),
        );
    }
    // The next request answers every call, under the id the provider gave, in call order.
    let requests = replay.requests();
    expect(
        requests.len() >= 2 || (case.calls.is_empty() && case.status == StopReason::Completed),
        format!("{} requests", requests.len()),
    );
    if let Some(next) = requests.get(1) {
        let tools: Vec<&Value> = next["messages"]
            .as_array()
            .map(|m| m.iter().filter(|m| m["role"] == "tool").collect())
            .unwrap_or_default();
        let ids: Vec<&str> = tools
            .iter()
            .map(|t| t["tool_call_id"].as_str().unwrap_or(""))
            .collect();
        let want: Vec<&str> = case.calls.iter().map(|c| c.2).collect();
        expect(
            ids == want,
            format!("tool messages for {ids:?}, expected {want:?}"),
        );
        for ((name, args, _), tool) in case.calls.iter().zip(&tools) {
            let path: Option<String> = serde_json::from_str::<Value>(args)
                .ok()
                .and_then(|a| a["file_path"].as_str().map(str::to_string));
            if let (&"read_file", Some((_, text))) = (
                name,
                WORKSPACE_FILES
                    .iter()
                    .find(|(f, _)| Some(*f) == path.as_deref()),
            ) {
                let content = tool["content"].as_str().unwrap_or("");
                expect(
                    content.contains(text.trim()),
                    format!("read_file {path:?} answered {content:?}"),
                );
            }
        }
    }
    // The task goes on to an answer (thinking alone, as in one recording, ends it without one).
    let answers = !case.texts.is_empty() || !case.calls.is_empty();
    expect(
        seen.final_text.is_some() || (case.status == StopReason::Completed && !answers),
        format!("no final text; requests ended {:?}", seen.statuses),
    );
    bad
}
