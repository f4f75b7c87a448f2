//! OmniMessage serialize/parse (a read_file output also through serde_json's serializer, the
//! writer Rookery's own replaced); trace appends through the `TraceActor` next to a raw `write(2)`
//! loop on an `O_APPEND` file in the same group; one scripted turn with a no-op tool through the
//! whole session loop; and exec_command of `true` next to a raw `bash -lc true` spawn + wait
//! (HOME pointing at an empty directory in both).

// Benchmark set-up that fails is a bug of the benchmark: it panics, like a test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use rookery::actors::command_supervisor::tools::CommandTools;
use rookery::actors::command_supervisor::{CommandOptions, CommandSupervisorHandle};
use rookery::approval::AllowAllApprover;
use rookery::model::scripted::ScriptedModel;
use rookery::tools::close_out::{self, ToolCallInfo};
use rookery::tools::registry::{Permission, ToolDefinitionConfig};
use rookery::tools::{Tool, ToolContext, ToolEnv, ToolResult};
use rookery::{Host, SessionOptions};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use rookery::message::{OmniMessage, build};
use rookery::trace::writer::{TraceActor, TraceArgs, TraceMsg, TraceStats};

fn sample() -> OmniMessage {
    build::tool_call_output(
        "call_12",
        "     1\tline 1: the quick brown fox jumps over the lazy dog\n     2\tline 2: the quick brown fox",
        Vec::new(),
        rookery::message::StopReason::Completed,
    )
}

fn message(c: &mut Criterion) {
    let msg = sample();
    let line = msg.to_json();
    let mut g = c.benchmark_group("omnimessage");
    g.bench_function("serialize", |b| {
        b.iter(|| std::hint::black_box(msg.to_json()))
    });
    g.bench_function("parse", |b| {
        b.iter(|| std::hint::black_box(OmniMessage::from_json(&line).ok()))
    });
    // The output of the benchmark's `read_file` call (20 `cat -n` rows), as Rookery writes
    // it, beside serde_json's own serializer for the same message (the bytes are the same).
    let rows: String = rookery::bench::input_text()
        .lines()
        .enumerate()
        .map(|(i, line)| format!("{:6}\t{line}\n", i + 1))
        .collect();
    let long = build::tool_call_output(
        "call_12",
        &rows,
        Vec::new(),
        rookery::message::StopReason::Completed,
    );
    assert_eq!(long.to_json(), serde_json::to_string(&long).unwrap());
    g.bench_function("serialize_read_file_output", |b| {
        b.iter(|| std::hint::black_box(long.to_json()))
    });
    g.bench_function("serialize_read_file_output_serde_json", |b| {
        b.iter(|| std::hint::black_box(serde_json::to_string(&long).ok()))
    });
    g.finish();
}

const BATCH: usize = 1000;

fn trace_append(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    // A 240-byte record.
    let mut msg = build::user_text("", None);
    let pad = 240 - msg.to_json().len();
    msg = build::user_text("x".repeat(pad), None);
    let line = msg.to_json();
    assert_eq!(line.len(), 240);
    let line_bytes = format!("{line}\n").into_bytes();

    let mut g = c.benchmark_group("trace_append_1000x240B");
    g.bench_function("raw_write", |b| {
        let path = dir.path().join("raw.jsonl");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .expect("open");
        let mut buf = line.clone().into_bytes();
        buf.push(b'\n');
        b.iter(|| {
            for _ in 0..BATCH {
                f.write_all(&buf).expect("write");
            }
        })
    });
    g.bench_function("trace_actor", |b| {
        let path = dir.path().join("actor.jsonl");
        let actor = rt
            .block_on(ractor::Actor::spawn(
                None,
                TraceActor,
                TraceArgs {
                    file: rookery::trace::file::TraceFile::open(&path).expect("open trace"),
                    stats: Arc::new(TraceStats::default()),
                    redactor: None,
                    health: Arc::default(),
                },
            ))
            .expect("spawn")
            .0;
        b.iter_batched(
            || (),
            |_| {
                rt.block_on(async {
                    for _ in 0..BATCH {
                        let _ = actor.cast(TraceMsg::AppendLine(line_bytes.clone()));
                    }
                    // Wait until every record is written (no fsync: same as the raw loop).
                    let _ = ractor::call!(actor, TraceMsg::Written);
                })
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

/// Completes at once with no output.
struct Noop;

impl Tool for Noop {
    fn call(&self, _ctx: ToolContext, _args: Map<String, Value>) -> BoxFuture<'static, ToolResult> {
        Box::pin(async { ToolResult::completed() })
    }
}

/// One task of a fresh session per iteration: the scripted model asks for one `noop` call
/// (model events → approval → close-out → trace), then answers a text. Session creation and
/// closing are outside the timing.
fn scripted_turn(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let host = rt
        .block_on(Host::start(dir.path().join("home")))
        .expect("host");
    let script = json!({"turns": [
        {"tool_calls": [{"name": "noop", "arguments": {}}]},
        {"text": "done"}
    ]});
    let model = Arc::new(ScriptedModel::from_json_str(&script.to_string()).expect("script"));
    let mut options = SessionOptions::new(dir.path(), model);
    options.approver = Arc::new(AllowAllApprover);
    let mut tools = rookery::tools::registry::ToolRegistry::empty();
    tools.register(
        ToolDefinitionConfig::new(
            "noop",
            "Does nothing.",
            json!({"type": "object", "properties": {}}),
            Permission::Read,
        ),
        Arc::new(Noop),
    );
    options.config.tools = tools;
    let mut g = c.benchmark_group("session_turn");
    g.bench_function("scripted_noop_tool", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let s = host.create_session(options.clone()).await.expect("session");
                    let t = Instant::now();
                    let summary = s.run_task("go").await.expect("task");
                    total += t.elapsed();
                    assert_eq!(summary.tool_calls, 1);
                    let _ = s.close().await;
                }
                total
            })
        })
    });
    g.finish();
    rt.block_on(host.shutdown());
}

/// exec_command `true` through the close-out and a command supervisor, next to a raw
/// `bash -lc true` spawn + wait.
fn exec_true(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("empty-home");
    std::fs::create_dir_all(&home).expect("home");
    let home_s = home.display().to_string();
    let mut g = c.benchmark_group("exec_true");
    g.bench_function("raw_bash_spawn_wait", |b| {
        b.iter(|| {
            rt.block_on(async {
                let status = tokio::process::Command::new("bash")
                    .arg("-lc")
                    .arg("true")
                    .current_dir(dir.path())
                    .env("HOME", &home)
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status()
                    .await
                    .expect("bash");
                assert!(status.success());
            })
        })
    });
    let commands = rt
        .block_on(CommandSupervisorHandle::spawn_with(
            "bench".into(),
            dir.path().to_path_buf(),
            Arc::new(|_| {}),
            None,
            CommandOptions {
                env: vec![("HOME".into(), home_s)],
                ..CommandOptions::default()
            },
        ))
        .expect("supervisor");
    let registry = rookery::tools::profile::penguin::builtin_registry();
    let service = Arc::new(CommandTools::new(Some(commands.clone())));
    let tool = (registry.get("exec_command")).map(|t| t.bind(|_| service.clone()));
    g.bench_function("exec_command", |b| {
        b.iter(|| {
            rt.block_on(async {
                let out = close_out::execute(
                    ToolCallInfo {
                        tool_call_id: "call_0".into(),
                        name: "exec_command".into(),
                        arguments: r#"{"description":"Run a no-op command.","cmd":"true"}"#.into(),
                    },
                    tool.clone(),
                    ToolEnv {
                        workspace: dir.path().to_path_buf(),
                        path_ticket: None,
                        scope: Default::default(),
                        otel: Default::default(),
                    },
                    CancellationToken::new(),
                    Arc::new(|_| {}),
                )
                .await;
                std::hint::black_box(out);
            })
        })
    });
    g.finish();
    rt.block_on(commands.shutdown());
}

criterion_group!(benches, message, trace_append, scripted_turn, exec_true);
criterion_main!(benches);
