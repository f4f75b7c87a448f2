//! OpenTelemetry export through the real `rookery` binary to a loopback OTLP receiver
//! (`common::otlp`, decoding with the official protobuf definitions): the GenAI span tree of
//! a scripted session with a retried request, a failed tool call, approvals and a subagent
//! (names, parent links, attributes, ERROR status), the metrics, `TRACEPARENT` in a command's
//! environment, `traceparent` on model requests (a loopback model server), content absent by
//! default and present but scrubbed with `--otel-log-content`, and a collector that refuses
//! or hangs costing the session nothing.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::cli::*;
use crate::common::openai_mock::{Mock, Reply};
use crate::common::otlp::{Behaviour, Receiver, Span};
use serde_json::{Value, json};

/// `cmd` with the receiver as the OTLP endpoint and no other `OTEL_*` variable.
fn with_endpoint(mut cmd: Command, endpoint: &str) -> Command {
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("OTEL_") || k == "ROOKERY_OTEL_LOG_CONTENT" {
            cmd.env_remove(k);
        }
    }
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("OTEL_SERVICE_NAME", "rookery-test");
    cmd
}

/// Runs `cmd` off the runtime (the receiver answers on it meanwhile).
async fn run(cmd: Command) -> (Out, Duration) {
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let out = Running::spawn(cmd).wait(RUN_TIMEOUT);
        (out, started.elapsed())
    })
    .await
    .unwrap()
}

fn named<'a>(spans: &'a [Span], prefix: &str) -> Vec<&'a Span> {
    spans
        .iter()
        .filter(|s| s.name.starts_with(prefix))
        .collect()
}

fn by_id<'a>(spans: &'a [Span], id: &str) -> &'a Span {
    spans
        .iter()
        .find(|s| s.span_id == id)
        .unwrap_or_else(|| panic!("no span {id} in {spans:#?}"))
}

/// The session id of the trace file whose `session_meta` has no `source` (the user session).
fn user_session(sb: &Sandbox) -> (String, Vec<Value>) {
    for f in sb.trace_files() {
        let records = read_records(&f);
        if records[0]["payload"]["source"].is_null() {
            let id = records[0]["payload"]["session_id"]
                .as_str()
                .unwrap()
                .to_string();
            return (id, records);
        }
    }
    panic!("no user session trace in {:?}", sb.trace_files());
}

const CONTENT_KEYS: &[&str] = &[
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_session_exports_its_genai_span_tree() {
    let otlp = Receiver::start(Behaviour::Accept).await;
    let sb = Sandbox::new();
    let config = sb.file(
        "agent.yaml",
        "retry:\n  max_retries: 2\n  base_ms: 10\n  cap_ms: 10\n",
    );
    let script = sb.script(&json!({
        "turns": [
            {"error": "failed"},
            {"tool_calls": [
                {"name": "run_subagent", "arguments": {"description": "delegate", "prompt": "child: say hi"}},
                {"name": "read_file", "arguments": {"file_path": "missing.txt"}},
                {"name": "exec_command", "arguments": {"cmd": "printf %s \"$TRACEPARENT\" > tp.txt"}}
            ]},
            {"text": "all done"}
        ],
        "children": [{"when_prompt_contains": "say hi", "turns": [{"text": "hi from child"}]}]
    }));
    let mut cmd = sb.run_command(&[
        "--script",
        s(&script),
        "--config",
        s(&config),
        "--otel",
        "Secret plan: tell me about the PROMPTMARK",
    ]);
    cmd.env("OTEL_METRIC_EXPORT_INTERVAL", "600000");
    let (out, _) = run(with_endpoint(cmd, &otlp.endpoint)).await;
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let (session_id, records) = user_session(&sb);
    // The trace says what the spans must say: the read failed, the others completed.
    let calls: Vec<String> = of_kind(&records, "tool_call")
        .iter()
        .map(|c| c["payload"]["tool_call_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(calls.len(), 3);
    assert_eq!(output_of(&records, &calls[1])["stop_reason"], "failed");

    let spans = otlp.spans();
    assert!(
        spans
            .iter()
            .all(|s| s.resource.get("service.name").map(String::as_str) == Some("rookery-test")),
        "OTEL_SERVICE_NAME names the service"
    );
    // The task: one root `invoke_agent` span with the session id.
    let tasks: Vec<&Span> = named(&spans, "invoke_agent rookery");
    assert_eq!(tasks.len(), 1, "{spans:#?}");
    let task = tasks[0];
    assert_eq!(task.parent, "", "the user task is a root span");
    assert_eq!(task.attrs["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(task.attrs["gen_ai.conversation.id"], session_id);
    assert!(!task.error);
    assert!(
        spans.iter().all(|s| s.trace_id == task.trace_id),
        "one trace"
    );

    // Two model requests of the task (the failed attempt is the first one's retry), neither an
    // error.
    let chats: Vec<&Span> = named(&spans, "chat scripted")
        .into_iter()
        .filter(|s| s.parent == task.span_id)
        .collect();
    assert_eq!(chats.len(), 2, "{spans:#?}");
    for c in &chats {
        assert_eq!(c.attrs["gen_ai.operation.name"], "chat");
        assert_eq!(c.attrs["gen_ai.provider.name"], "scripted");
        assert_eq!(c.attrs["gen_ai.request.model"], "scripted");
        assert_eq!(c.attrs["gen_ai.response.model"], "scripted");
        assert!(c.attrs.contains_key("gen_ai.usage.input_tokens"), "{c:#?}");
        assert!(c.attrs.contains_key("gen_ai.usage.output_tokens"), "{c:#?}");
        assert!(
            !c.error,
            "a request that succeeded (after a retry too) is no error: {c:#?}"
        );
    }
    let retried: Vec<&&Span> = chats
        .iter()
        .filter(|c| c.events.iter().any(|(n, _)| n == "rookery.retry"))
        .collect();
    assert_eq!(retried.len(), 1, "{chats:#?}");
    let (_, retry) = &retried[0].events[0];
    assert_eq!(retry["attempt"], "1");
    assert_eq!(retried[0].attrs["rookery.attempts"], "2");
    assert_eq!(retry["error.type"], "failed");
    assert!(retry["retry_in_ms"].parse::<u64>().is_ok(), "{retry:?}");
    let finish: Vec<&str> = chats
        .iter()
        .map(|c| c.attrs["gen_ai.response.finish_reasons"].as_str())
        .collect();
    assert!(
        finish.contains(&"[tool_calls]") && finish.contains(&"[stop]"),
        "{finish:?}"
    );

    // The three tool calls under the task, each with its approval under it.
    let tools: Vec<&Span> = named(&spans, "execute_tool ")
        .into_iter()
        .filter(|s| s.parent == task.span_id)
        .collect();
    assert_eq!(tools.len(), 3, "{spans:#?}");
    let tool = |id: &str| -> &Span {
        tools
            .iter()
            .find(|t| t.attrs["gen_ai.tool.call.id"] == id)
            .unwrap_or_else(|| panic!("no execute_tool span of {id}"))
    };
    let (sub, read, exec) = (tool(&calls[0]), tool(&calls[1]), tool(&calls[2]));
    assert_eq!(sub.name, "execute_tool run_subagent");
    assert_eq!(read.attrs["gen_ai.tool.name"], "read_file");
    assert_eq!(read.attrs["rookery.tool.stop_reason"], "failed");
    assert!(read.error, "a failed tool call is an ERROR: {read:#?}");
    assert!(
        !read.status_message.is_empty(),
        "the ERROR says why: {read:#?}"
    );
    assert!(!sub.error && !exec.error);
    assert_eq!(exec.attrs["rookery.tool.stop_reason"], "completed");
    let approvals = named(&spans, "rookery.approval");
    for t in [sub, read, exec] {
        let a: Vec<&&Span> = approvals.iter().filter(|a| a.parent == t.span_id).collect();
        assert_eq!(a.len(), 1, "one approval under {}: {approvals:#?}", t.name);
        assert_eq!(a[0].attrs["rookery.approval.decision"], "allow");
        assert!(!a[0].attrs["rookery.approval.source"].is_empty());
    }

    // The subagent's task is a child of the call that started it, with its own request.
    let child = named(&spans, "invoke_agent subagent");
    assert_eq!(child.len(), 1, "{spans:#?}");
    assert_eq!(child[0].parent, sub.span_id);
    assert_ne!(child[0].attrs["gen_ai.conversation.id"], session_id);
    let child_chats: Vec<&Span> = named(&spans, "chat ")
        .into_iter()
        .filter(|s| s.parent == child[0].span_id)
        .collect();
    assert_eq!(child_chats.len(), 1);

    // The command continued the trace: its TRACEPARENT is its call's span.
    let tp = std::fs::read_to_string(sb.ws().join("tp.txt")).expect("tp.txt");
    assert_eq!(tp, format!("00-{}-{}-01", exec.trace_id, exec.span_id));

    // No content without --otel-log-content.
    for s in &spans {
        for k in CONTENT_KEYS {
            assert!(
                !s.attrs.contains_key(*k),
                "{k} exported without the flag: {s:#?}"
            );
        }
        assert!(
            s.attrs.values().all(|v| !v.contains("PROMPTMARK")),
            "the prompt leaked: {s:#?}"
        );
    }
    // The parents all exist (nothing dangles but the root).
    for s in &spans {
        if !s.parent.is_empty() {
            by_id(&spans, &s.parent);
        }
    }

    // The metrics, pushed when the process ended.
    let metrics = otlp.metric_names();
    for name in [
        "gen_ai.client.operation.duration",
        "gen_ai.client.token.usage",
        "rookery.tool.calls",
        "rookery.tasks.finished",
    ] {
        assert!(
            metrics.iter().any(|m| m == name),
            "no {name} in {metrics:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_is_exported_with_the_flag_scrubbed_and_requests_carry_traceparent() {
    let otlp = Receiver::start(Behaviour::Accept).await;
    let secret = "sk-otel-secret-4242";
    let reply = |text: &str| {
        Reply::Sse(vec![
            format!(
                "data: {}\n\n",
                json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]})
            ),
            format!(
                "data: {}\n\n",
                json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}})
            ),
            "data: [DONE]\n\n".to_string(),
        ])
    };
    let model = Mock::start(
        vec![reply(&format!("the key is {secret}"))],
        Some(format!("Bearer {secret}")),
    )
    .await;
    let sb = Sandbox::new();
    let mut cmd = sb.run_command(&[
        "--provider",
        "openai",
        "--base-url",
        &model.base_url,
        "--model",
        "m-1",
        "--api-key-env",
        "OTEL_TEST_KEY",
        "--otel",
        "--otel-log-content",
        &format!("repeat {secret} please"),
    ]);
    cmd.env("OTEL_TEST_KEY", secret)
        .env("OTEL_METRICS_EXPORTER", "none");
    let (out, _) = run(with_endpoint(cmd, &otlp.endpoint)).await;
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    model.assert_clean();
    let spans = otlp.spans();
    let task = named(&spans, "invoke_agent ")[0];
    let chat = named(&spans, "chat m-1");
    assert_eq!(chat.len(), 1, "{spans:#?}");
    let chat = chat[0];
    assert_eq!(chat.attrs["gen_ai.provider.name"], "openai");
    assert_eq!(chat.attrs["gen_ai.usage.input_tokens"], "7");
    assert_eq!(chat.attrs["gen_ai.usage.output_tokens"], "3");
    // The request carried the chat span's context.
    let seen = model.state.traceparents.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![Some(format!("00-{}-{}-01", chat.trace_id, chat.span_id))]
    );
    // Content is there, scrubbed as in the trace.
    let input = &task.attrs["gen_ai.input.messages"];
    assert!(input.contains("repeat [redacted] please"), "{input}");
    let output = &chat.attrs["gen_ai.output.messages"];
    assert!(output.contains("the key is [redacted]"), "{output}");
    for s in &spans {
        for (k, v) in &s.attrs {
            assert!(!v.contains(secret), "{k} carries the secret: {s:#?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_refuses_or_hangs_never_slows_the_session() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [{"name": "exec_command", "arguments": {"cmd": "true"}}]},
        {"text": "done"}
    ]}));
    let args = ["--script", s(&script), "go"];
    let (plain, base) = run(sb.run_command(&args)).await;
    assert_eq!(plain.code, Some(0), "stderr:\n{}", plain.stderr);
    // A port nobody listens on: every export is refused at connect.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let hang = Receiver::start(Behaviour::Hang).await;
    let refuse = Receiver::start(Behaviour::Refuse).await;
    for (what, endpoint) in [
        ("closed port", closed.as_str()),
        ("503", refuse.endpoint.as_str()),
        ("hang", hang.endpoint.as_str()),
    ] {
        let mut with = vec!["--otel"];
        with.extend(args);
        let (out, took) = run(with_endpoint(sb.run_command(&with), endpoint)).await;
        assert_eq!(out.code, Some(0), "{what}: stderr:\n{}", out.stderr);
        assert!(out.stdout.contains("done"), "{what}: {}", out.stdout);
        // The task is not held up, and the process waits at most 2 s for the collector (plus
        // half a second of a loaded machine's noise).
        assert!(
            took < base + Duration::from_millis(2500),
            "{what}: {took:?} against {base:?} without --otel"
        );
        assert!(
            out.stderr.contains("spans were dropped"),
            "{what}: the drops are counted and reported:\n{}",
            out.stderr
        );
    }
    assert!(*hang.received.requests.lock().unwrap() >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_exported_without_the_flag() {
    let otlp = Receiver::start(Behaviour::Accept).await;
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "done"}]}));
    let (out, _) = run(with_endpoint(
        sb.run_command(&["--script", s(&script), "go"]),
        &otlp.endpoint,
    ))
    .await;
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(*otlp.received.requests.lock().unwrap(), 0);
    // A protocol the build does not speak is a usage error naming the ones it does.
    let mut cmd = sb.run_command(&["--script", s(&script), "--otel", "go"]);
    cmd.env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json");
    let (out, _) = run(with_endpoint(cmd, &otlp.endpoint)).await;
    assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
    assert!(out.stderr.contains("http/protobuf"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_a_log_line() {
    let secret = "sk-log-secret-7777";
    let model = Mock::start(vec![], Some(format!("Bearer {secret}"))).await;
    let sb = Sandbox::new();
    // The model answers nothing scripted (500s): the error and retry paths log too.
    let config = sb.file(
        "agent.yaml",
        "retry:\n  max_retries: 1\n  base_ms: 10\n  cap_ms: 10\n",
    );
    let mut cmd = sb.run_command(&[
        "--config",
        s(&config),
        "--provider",
        "openai",
        "--base-url",
        &model.base_url,
        "--model",
        "m-1",
        "--api-key-env",
        "OTEL_TEST_KEY",
        &format!("say {secret}"),
    ]);
    cmd.env("OTEL_TEST_KEY", secret).env("RUST_LOG", "trace");
    let (out, _) = run(cmd).await;
    assert!(!out.stderr.is_empty(), "RUST_LOG=trace logs");
    for line in out.stderr.lines() {
        assert!(!line.contains(secret), "a log line has the secret: {line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_export_carries_the_same_spans() {
    let otlp = Receiver::start_grpc().await;
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [{"name": "read_file", "arguments": {"file_path": "missing.txt"}}]},
        {"text": "done"}
    ]}));
    let mut cmd = sb.run_command(&["--script", s(&script), "--otel", "go"]);
    cmd.env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc");
    let (out, _) = run(with_endpoint(cmd, &otlp.endpoint)).await;
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert!(!out.stderr.contains("dropped"), "{}", out.stderr);
    let spans = otlp.spans();
    let task = named(&spans, "invoke_agent rookery");
    assert_eq!(task.len(), 1, "{spans:#?}");
    let read = named(&spans, "execute_tool read_file");
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].parent, task[0].span_id);
    assert!(read[0].error);
    assert_eq!(named(&spans, "chat scripted").len(), 2);
    assert!(
        otlp.metric_names()
            .iter()
            .any(|m| m == "gen_ai.client.operation.duration")
    );
}

/// Polls the receiver until `want` holds for its spans (an export arrives within ~200 ms of a
/// span's end; the bound is generous for a loaded machine).
async fn spans_until(otlp: &Receiver, want: impl Fn(&[Span]) -> bool) -> Vec<Span> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let spans = otlp.spans();
        if want(&spans) {
            return spans;
        }
        assert!(Instant::now() < deadline, "spans never came: {spans:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_joins_a_clients_traceparent_and_logs_json_lines() {
    use crate::common::serve::{Server, sandbox};
    let otlp = Receiver::start(Behaviour::Accept).await;
    let dir = sandbox(&json!({"turns": [{"text": "one"}, {"text": "two"}]}));
    let server = Server::start_env(
        dir,
        None,
        &["--otel", "--log-format", "json"],
        None,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_METRICS_EXPORTER", "none"),
            ("RUST_LOG", "debug"),
        ],
    );
    let id = server.create(None).await;
    let (trace_id, parent) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let r = server
        .req(reqwest::Method::POST, &format!("/v1/sessions/{id}/tasks"))
        .header("traceparent", format!("00-{trace_id}-{parent}-01"))
        .json(&json!({"text": "first"}));
    let (status, v) = server.send(r).await;
    assert_eq!(status.as_u16(), 202, "{v}");
    server
        .events_until_task_end(&id, v["events_after"].as_u64().unwrap())
        .await;
    let spans = spans_until(&otlp, |s| !named(s, "invoke_agent").is_empty()).await;
    let task = named(&spans, "invoke_agent rookery")[0];
    assert_eq!(
        (task.trace_id.as_str(), task.parent.as_str()),
        (trace_id, parent)
    );
    assert_eq!(task.attrs["gen_ai.conversation.id"], id);
    // A task without the header is a trace of its own; a bad header is ignored.
    let r = server
        .req(reqwest::Method::POST, &format!("/v1/sessions/{id}/tasks"))
        .header("traceparent", "00-zz-00f067aa0ba902b7-01")
        .json(&json!({"text": "second"}));
    let (status, v) = server.send(r).await;
    assert_eq!(status.as_u16(), 202, "{v}");
    server
        .events_until_task_end(&id, v["events_after"].as_u64().unwrap())
        .await;
    let spans = spans_until(&otlp, |s| named(s, "invoke_agent").len() == 2).await;
    let second = named(&spans, "invoke_agent")
        .into_iter()
        .find(|s| s.span_id != task.span_id)
        .unwrap();
    assert_eq!(second.parent, "");
    assert_ne!(second.trace_id, trace_id);
    // `--log-format json`: every log line is one JSON object, none has the token.
    let token = server.token.clone().unwrap();
    let stderr = server.stderr();
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut logged = 0;
    for line in lines {
        assert!(!line.contains(&token), "the token on stderr: {line}");
        // serve's own notices (`token: <file>`) are not log lines.
        if !line.starts_with('{') {
            for level in ["TRACE", "DEBUG", " INFO", " WARN", "ERROR"] {
                assert!(!line.contains(level), "a text log line: {line}");
            }
            continue;
        }
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
        assert!(v["level"].is_string() && v["fields"].is_object(), "{line}");
        logged += 1;
    }
    assert!(logged > 0, "RUST_LOG=debug logs something:\n{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_pushes_the_server_gauges_of_metrics_over_otlp() {
    use crate::common::serve::{Server, sandbox};
    let otlp = Receiver::start(Behaviour::Accept).await;
    let dir = sandbox(&json!({"turns": [{"text": "one"}]}));
    let server = Server::start_env(
        dir,
        None,
        &["--otel"],
        None,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "200"),
        ],
    );
    let id = server.create(None).await;
    let after = server.task(&id, "first").await;
    server.events_until_task_end(&id, after).await;
    // The same figures as /metrics: one idle session, its trace bytes, no command running.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let points = otlp.gauge_points();
        let idle = points
            .iter()
            .rev()
            .find(|(name, attrs, _)| name == "rookery.sessions" && attrs == "status=idle");
        if idle.is_some_and(|(_, _, v)| *v == 1) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no rookery.sessions status=idle 1 in {points:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let names = otlp.metric_names();
    for name in [
        "rookery.sessions",
        "rookery.commands.live",
        "rookery.subagents.live",
        "rookery.approvals.pending",
        "rookery.sse.clients",
        "rookery.trace.bytes_written",
    ] {
        assert!(names.iter().any(|m| m == name), "no {name} in {names:?}");
    }
    let metrics = server.metrics_text().await;
    assert!(
        metrics.contains("rookery_sessions{status=\"idle\"} 1"),
        "{metrics}"
    );
}
