//! The library API in a few lines: a host, a session on the scripted model, one task, its
//! stream of messages, and the trace it leaves. Run with `cargo run --example library`.

use std::sync::Arc;

use rookery::approval::{ApprovalMode, DenyAllApprover, PolicyApprover};
use rookery::model::scripted::ScriptedModel;
use rookery::{Host, SessionOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let model = ScriptedModel::from_json_str(
        r#"{"turns": [
            {"tool_calls": [{"name": "write_file",
                             "arguments": {"file_path": "hello.txt", "content": "hi\n"}}]},
            {"text": "Wrote hello.txt."}
        ]}"#,
    )?;

    let host = Host::start(dir.path().join("home")).await?;
    let mut options = SessionOptions::new(dir.path(), Arc::new(model));
    // The library default denies every call; allow them here.
    options.approver = Arc::new(PolicyApprover::new(
        ApprovalMode::AllowAll,
        Arc::new(DenyAllApprover),
    ));
    let session = host.create_session(options).await?;

    let mut stream = session.subscribe().await?; // partials, messages, events, in order
    let summary = session.run_task("Say hi in a file").await?;
    while let Ok(msg) = stream.try_recv() {
        // The complete messages and events; the streaming `partial_*` pieces are skipped.
        if !msg.as_model().is_some_and(|p| p.is_partial()) {
            println!("{}", msg.to_json());
        }
    }
    println!(
        "status: {}, answer: {:?}",
        summary.status, summary.final_text
    );
    session.close().await?; // trace flushed and closed
    println!("trace: {}", session.trace_path().display());
    host.shutdown().await;
    Ok(())
}
