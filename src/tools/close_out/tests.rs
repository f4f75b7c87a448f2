//! Tests of the close-out (`super`): small tools implementing `Tool`, real timers and a real
//! workspace directory; every case also checks the framing invariants.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use futures::future::BoxFuture;
use serde_json::json;

use super::*;
use crate::message::{ModelPayload, Payload};
use crate::tools::Tool;
use crate::tools::registry::{Permission, ToolDefinitionConfig};

struct FnTool<F>(F);

impl<F, Fut> Tool for FnTool<F>
where
    F: Fn(ToolContext, Map<String, Value>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ToolResult> + Send + 'static,
{
    fn call(&self, ctx: ToolContext, args: Map<String, Value>) -> BoxFuture<'static, ToolResult> {
        Box::pin((self.0)(ctx, args))
    }
}

fn tool_with<F, Fut>(timeout_ms: i64, max_output_length: i64, f: F) -> Option<BoundTool>
where
    F: Fn(ToolContext, Map<String, Value>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ToolResult> + Send + 'static,
{
    let mut def = ToolDefinitionConfig::new(
        "probe",
        "test tool",
        json!({"type": "object"}),
        Permission::Read,
    );
    def.timeout_ms = timeout_ms;
    def.max_output_length = max_output_length;
    Some(BoundTool {
        definition: Arc::new(def),
        tool: Arc::new(FnTool(f)),
    })
}

fn tool<F, Fut>(f: F) -> Option<BoundTool>
where
    F: Fn(ToolContext, Map<String, Value>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ToolResult> + Send + 'static,
{
    tool_with(120_000, 16_000, f)
}

fn call(name: &str, arguments: &str) -> ToolCallInfo {
    ToolCallInfo {
        tool_call_id: "call_7".into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

/// One partial as (event, text, images, stop_reason, tool_call_id).
type Part = (EventType, String, Vec<String>, StopReason, String);

struct Run {
    parts: Vec<Part>,
    output: String,
    images: Vec<String>,
    stop: StopReason,
}

async fn run_with(
    c: ToolCallInfo,
    t: Option<BoundTool>,
    workspace: PathBuf,
    cancel: CancellationToken,
) -> Run {
    let seen: Arc<Mutex<Vec<OmniMessage>>> = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let emit: Emit = Arc::new(move |m| sink.lock().unwrap().push(m));
    let id = c.tool_call_id.clone();
    let env = crate::tools::ToolEnv {
        workspace,
        path_ticket: None,
        scope: Default::default(),
        otel: Default::default(),
    };
    let complete = execute(c, t, env, cancel, emit).await;
    let parts: Vec<Part> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|m| match &m.payload {
            Payload::Model(ModelPayload::PartialToolCallOutput {
                event_type,
                output,
                images,
                tool_call_id,
                stop_reason,
                ..
            }) => (
                *event_type,
                output.clone(),
                images.clone(),
                *stop_reason,
                tool_call_id.clone(),
            ),
            other => panic!("unexpected emitted message {other:?}"),
        })
        .collect();
    let Payload::Model(ModelPayload::ToolCallOutput {
        output,
        images,
        tool_call_id,
        stop_reason,
        ..
    }) = complete.payload
    else {
        panic!("not a tool_call_output: {complete:?}");
    };
    assert_eq!(tool_call_id, id);
    let run = Run {
        parts,
        output,
        images,
        stop: stop_reason,
    };
    check_framing(&run, &id);
    run
}

async fn run(c: ToolCallInfo, t: Option<BoundTool>) -> Run {
    run_with(c, t, std::env::temp_dir(), CancellationToken::new()).await
}

/// start first, stop last with the final stop_reason, ids, text deltas == output, images once.
fn check_framing(run: &Run, id: &str) {
    let parts = &run.parts;
    assert!(parts.len() >= 2, "{parts:?}");
    assert_eq!(parts[0].0, EventType::Start);
    assert_eq!(parts[0].1, "");
    let last = &parts[parts.len() - 1];
    assert_eq!(last.0, EventType::Stop);
    assert_eq!(last.1, "");
    assert_eq!(last.3, run.stop);
    assert!(parts.iter().all(|p| p.4 == id), "{parts:?}");
    let middle = &parts[1..parts.len() - 1];
    assert!(middle.iter().all(|p| p.0 == EventType::Delta), "{parts:?}");
    let text: String = middle.iter().map(|p| p.1.as_str()).collect();
    assert_eq!(text, run.output);
    assert!(!run.output.is_empty());
    let with_images: Vec<&Part> = middle.iter().filter(|p| !p.2.is_empty()).collect();
    if run.images.is_empty() {
        assert!(with_images.is_empty(), "{parts:?}");
    } else {
        assert_eq!(run.stop, StopReason::Completed);
        assert_eq!(with_images.len(), 1);
        assert_eq!(with_images[0].1, "");
        assert_eq!(with_images[0].2, run.images);
        // The image delta is the last one before stop.
        assert_eq!(middle[middle.len() - 1].2, run.images);
    }
}

fn deltas(run: &Run) -> Vec<&str> {
    run.parts[1..run.parts.len() - 1]
        .iter()
        .map(|p| p.1.as_str())
        .collect()
}

#[tokio::test]
async fn plain_output_reads_through_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("note.txt"), "hello from disk").unwrap();
    let t = tool(|ctx, args| async move {
        let file = args
            .get("file")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match std::fs::read_to_string(ctx.resolve(&file)) {
            Ok(text) => {
                ctx.emit(text);
                ctx.emit(" | id=");
                ctx.emit(ctx.tool_call_id.clone());
                ToolResult::completed()
            }
            Err(e) => ToolResult {
                error: Some(e.to_string()),
                ..ToolResult::default()
            },
        }
    });
    let c = call("probe", r#"{"file":"note.txt"}"#);
    let r = run_with(c, t, dir.path().to_path_buf(), CancellationToken::new()).await;
    assert_eq!(r.stop, StopReason::Completed);
    assert_eq!(r.output, "hello from disk | id=call_7");
    assert_eq!(deltas(&r), vec!["hello from disk", " | id=", "call_7"]);
}

#[tokio::test]
async fn no_output_is_marked() {
    let r = run(
        call("probe", "{}"),
        tool(|_, _| async { ToolResult::completed() }),
    )
    .await;
    assert_eq!(r.stop, StopReason::Completed);
    assert_eq!(r.output, "[no output]");
    assert_eq!(r.parts.len(), 3);
}

#[tokio::test]
async fn unknown_tool_is_checked_before_arguments() {
    let r = run(call("nope", "not json"), None).await;
    assert_eq!(r.stop, StopReason::Failed);
    assert_eq!(r.output, "Unknown tool: nope");
    assert_eq!(r.parts.len(), 3);
}

#[tokio::test]
async fn blank_and_invalid_arguments() {
    let never = || tool(|_, _| async { panic!("must not run") });
    let r = run(call("probe", "  \n "), never()).await;
    assert_eq!(r.stop, StopReason::Failed);
    assert_eq!(
        r.output,
        "Tool call \"probe\" failed: the arguments field is empty. Re-issue the call with a complete JSON object."
    );
    assert_eq!(r.parts.len(), 3);

    let r = run(call("probe", "{\"a\":"), never()).await;
    assert_eq!(r.stop, StopReason::Failed);
    assert_eq!(
        r.output,
        "Tool call \"probe\" failed: the arguments are not valid JSON (EOF while parsing a value at line 1 column 5). Re-issue the call with one complete, valid JSON object."
    );
}

#[tokio::test]
async fn non_object_arguments_become_empty_object() {
    for raw in ["42", "null", "\"text\"", "[1,2]"] {
        let t = tool(|ctx, args| async move {
            ctx.emit(format!("args={}", Value::Object(args)));
            ToolResult::completed()
        });
        let r = run(call("probe", raw), t).await;
        assert_eq!(r.stop, StopReason::Completed, "{raw}");
        assert_eq!(r.output, "args={}", "{raw}");
    }
}

#[tokio::test]
async fn truncation_keeps_head_without_splitting_characters() {
    let t = tool_with(120_000, 50, |ctx, _| async move {
        ctx.emit("ab");
        for _ in 0..10 {
            ctx.emit("é😀".repeat(7));
        }
        ToolResult::completed()
    });
    let r = run(call("probe", "{}"), t).await;
    assert_eq!(r.stop, StopReason::Completed);
    let head: String = format!("ab{}", "é😀".repeat(24));
    assert_eq!(head.chars().count(), 50);
    assert_eq!(
        r.output,
        format!("{head}\n[output truncated: exceeded 50 chars]")
    );
    let chars: Vec<char> = r.output.chars().collect();
    let marker: String = chars[51..].iter().collect();
    assert!(marker.starts_with("[output truncated"), "{marker}");
    assert_eq!(chars[50], '\n');
    // Online: "ab", then 14-char chunks until the cap, then nothing but the notes delta.
    let d = deltas(&r);
    assert_eq!(d[0], "ab");
    assert_eq!(d.len(), 1 + 4 + 1, "{d:?}");
    assert_eq!(d[4].chars().count(), 6);
    assert_eq!(d[5], "\n[output truncated: exceeded 50 chars]");
}

#[tokio::test]
async fn exactly_at_cap_and_disabled_cap_do_not_truncate() {
    let t = tool_with(120_000, 5, |ctx, _| async move {
        ctx.emit("ééééé");
        ToolResult::completed()
    });
    assert_eq!(run(call("probe", "{}"), t).await.output, "ééééé");
    let t = tool_with(120_000, 0, |ctx, _| async move {
        ctx.emit("x".repeat(20_000));
        ToolResult::completed()
    });
    assert_eq!(run(call("probe", "{}"), t).await.output, "x".repeat(20_000));
}

#[tokio::test]
async fn tool_note_sits_outside_truncation() {
    let t = tool_with(120_000, 10, |ctx, _| async move {
        ctx.emit("0123456789ABCDEF");
        ToolResult::failed().with_note("[exit code: 3]")
    });
    let r = run(call("probe", "{}"), t).await;
    assert_eq!(r.stop, StopReason::Failed);
    assert_eq!(
        r.output,
        "0123456789\n[output truncated: exceeded 10 chars]\n[exit code: 3]"
    );
    assert_eq!(deltas(&r).len(), 2);
}

#[tokio::test]
async fn tool_error_keeps_prior_output() {
    let t = tool(|ctx, _| async move {
        ctx.emit("partial work");
        ToolResult {
            error: Some("disk on fire".into()),
            stop_reason: Some(StopReason::Completed),
            images: vec!["data:image/png;base64,AAAA".into()],
            ..ToolResult::default()
        }
    });
    let r = run(call("probe", "{}"), t).await;
    assert_eq!(r.stop, StopReason::Failed);
    assert_eq!(r.output, "partial work\n[tool error] disk on fire");
    assert!(r.images.is_empty());
    assert_eq!(
        deltas(&r),
        vec!["partial work", "\n[tool error] disk on fire"]
    );
}

#[tokio::test]
async fn panicking_tool_becomes_tool_error() {
    let t = tool(|ctx, _| async move {
        ctx.emit("before");
        tokio::task::yield_now().await;
        panic!("kaboom");
    });
    let r = run(call("probe", "{}"), t).await;
    assert_eq!(r.stop, StopReason::Failed);
    assert_eq!(r.output, "before\n[tool error] tool panicked: kaboom");
}

#[tokio::test]
async fn self_reported_aborted_and_no_output_note_only() {
    let t = tool(|_, _| async {
        ToolResult {
            stop_reason: Some(StopReason::Aborted),
            ..ToolResult::default()
        }
    });
    let r = run(call("probe", "{}"), t).await;
    assert_eq!(r.stop, StopReason::Aborted);
    assert_eq!(r.output, "[interrupted: tool aborted by user]");
}

#[tokio::test]
async fn timeout_cancels_a_cooperative_tool() {
    let t = tool_with(100, 16_000, |ctx, _| async move {
        ctx.emit("waiting");
        ctx.cancel.cancelled().await;
        ctx.emit(" stopped");
        ToolResult::completed()
    });
    let started = Instant::now();
    let r = run(call("probe", "{}"), t).await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(r.stop, StopReason::Failed);
    assert_eq!(r.output, "waiting stopped\n[tool timeout: exceeded 100ms]");
}

#[tokio::test]
async fn timeout_with_a_tool_ignoring_cancel_ends_after_grace() {
    let t = tool_with(100, 16_000, |ctx, _| async move {
        ctx.emit("stubborn");
        tokio::time::sleep(Duration::from_secs(60)).await;
        ToolResult::completed()
    });
    let started = Instant::now();
    let r = run(call("probe", "{}"), t).await;
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(2_100), "{took:?}");
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert_eq!(r.stop, StopReason::Failed);
    assert_eq!(r.output, "stubborn\n[tool timeout: exceeded 100ms]");
}

#[tokio::test]
async fn user_abort_is_aborted_and_relabels_errors() {
    let user = CancellationToken::new();
    let trigger = user.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(30)).await;
        trigger.cancel();
    });
    let t = tool(|ctx, _| async move {
        ctx.emit("running");
        ctx.cancel.cancelled().await;
        ToolResult {
            error: Some("cancelled".into()),
            ..ToolResult::default()
        }
    });
    let r = run_with(call("probe", "{}"), t, std::env::temp_dir(), user).await;
    assert_eq!(r.stop, StopReason::Aborted);
    assert_eq!(r.output, "running\n[interrupted: tool aborted by user]");
}

#[tokio::test]
async fn user_abort_beats_a_later_timeout() {
    let user = CancellationToken::new();
    let trigger = user.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        trigger.cancel();
    });
    // Ignores cancel, so the 100 ms timer also fires during the grace period.
    let t = tool_with(100, 16_000, |_, _| async move {
        tokio::time::sleep(Duration::from_secs(60)).await;
        ToolResult::completed()
    });
    let started = Instant::now();
    let r = run_with(call("probe", "{}"), t, std::env::temp_dir(), user).await;
    assert!(started.elapsed() < Duration::from_secs(4));
    assert_eq!(r.stop, StopReason::Aborted);
    assert_eq!(r.output, "[interrupted: tool aborted by user]");
}

#[tokio::test]
async fn images_only_on_completed() {
    let img = "data:image/png;base64,iVBORw0KGgo=".to_string();
    let ok_img = img.clone();
    let t = tool(move |ctx, _| {
        let img = ok_img.clone();
        async move {
            ctx.emit("image/png, 8 bytes");
            ToolResult {
                images: vec![img],
                ..ToolResult::default()
            }
        }
    });
    let r = run(call("probe", "{}"), t).await;
    assert_eq!(r.stop, StopReason::Completed);
    assert_eq!(r.output, "image/png, 8 bytes");
    assert_eq!(r.images, vec![img.clone()]);
    assert_eq!(r.parts.len(), 4);

    let failed_img = img.clone();
    let t = tool(move |_, _| {
        let img = failed_img.clone();
        async move {
            ToolResult {
                images: vec![img],
                ..ToolResult::failed().with_note("[bad image]")
            }
        }
    });
    let r = run(call("probe", "{}"), t).await;
    assert_eq!(r.stop, StopReason::Failed);
    assert_eq!(r.output, "[bad image]");
    assert!(r.images.is_empty());
}

#[tokio::test]
async fn zero_timeout_disables_the_timer() {
    let t = tool_with(0, 16_000, |ctx, _| async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        ctx.emit(format!("cancelled={}", ctx.cancel.is_cancelled()));
        ToolResult::completed()
    });
    let r = run(call("probe", "{}"), t).await;
    assert_eq!(r.stop, StopReason::Completed);
    assert_eq!(r.output, "cancelled=false");
}

#[tokio::test]
async fn already_cancelled_user_token_aborts() {
    let user = CancellationToken::new();
    user.cancel();
    let t = tool(|ctx, _| async move {
        ctx.emit(format!("cancelled={}", ctx.cancel.is_cancelled()));
        ToolResult::completed()
    });
    let r = run_with(call("probe", "{}"), t, std::env::temp_dir(), user).await;
    assert_eq!(r.stop, StopReason::Aborted);
    assert_eq!(
        r.output,
        "cancelled=true\n[interrupted: tool aborted by user]"
    );
}

/// A sandboxed session's calls are held to its layout before the tool runs: write_file outside
/// the writable roots fails with the refusal and writes nothing; without a sandbox it writes.
#[tokio::test]
async fn the_close_out_refuses_before_the_tool_runs() {
    let root = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(root.path()).unwrap();
    for d in ["ws", "home", "tmp", "out"] {
        std::fs::create_dir_all(base.join(d)).unwrap();
    }
    let policy = crate::sandbox::SandboxPolicy {
        mode: crate::sandbox::SandboxMode::WorkspaceWrite,
        ..Default::default()
    };
    let layout = crate::sandbox::SandboxLayout::resolve(
        &policy,
        &base.join("ws"),
        &base.join("home/.rookery"),
        Some(&base.join("home")),
        &base.join("tmp"),
    )
    .unwrap();
    let registry = crate::tools::profile::penguin::builtin_registry();
    let bound = registry
        .get("write_file")
        .map(|t| t.bind(|_| unreachable!("write_file is local")));
    for (sandbox, written) in [(Some(Arc::new(layout)), false), (None, true)] {
        let env = crate::tools::ToolEnv {
            workspace: base.join("ws"),
            path_ticket: None,
            scope: crate::tools::session_scope::SessionScope::with_sandbox(sandbox),
            otel: Default::default(),
        };
        let call = ToolCallInfo {
            tool_call_id: "call_0".into(),
            name: "write_file".into(),
            arguments: json!({"file_path": "../out/x.txt", "content": "x"}).to_string(),
        };
        let out = execute(
            call,
            bound.clone(),
            env,
            Default::default(),
            Arc::new(|_| {}),
        )
        .await;
        let text = out.to_json();
        assert_eq!(base.join("out/x.txt").exists(), written, "{text}");
        assert_eq!(
            text.contains("sandbox workspace-write: writing "),
            !written,
            "{text}"
        );
    }
}
