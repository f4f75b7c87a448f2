//! A session's subscribers are bounded: one that never reads keeps at most
//! `SUBSCRIBER_CAPACITY` messages and learns how many it lost; one that keeps up loses nothing.

use crate::common;

use std::sync::Arc;

use common::{options, scripted, slow_def, tempdirs};
use futures::future::BoxFuture;
use rookery::Host;
use rookery::actors::session::SUBSCRIBER_CAPACITY;
use rookery::message::{EventPayload, StopReason};
use rookery::tools::{Tool, ToolContext, ToolResult};
use serde_json::{Map, Value, json};

/// Streams `n` one-character pieces: one partial delta each.
struct ChattyTool {
    n: usize,
}

impl Tool for ChattyTool {
    fn call(&self, ctx: ToolContext, _args: Map<String, Value>) -> BoxFuture<'static, ToolResult> {
        let n = self.n;
        Box::pin(async move {
            for _ in 0..n {
                ctx.emit("x");
                tokio::task::yield_now().await;
            }
            ToolResult::completed()
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_never_reads_stays_bounded_and_counts_what_it_lost() {
    let (_d, ws, home) = tempdirs();
    let model = scripted(json!({"turns": [
        {"tool_calls": [{"name": "chatty", "arguments": {}}]},
        {"text": "done"}
    ]}));
    let mut o = options(&ws, model);
    let mut def = slow_def("chatty");
    def.max_output_length = 1_000_000;
    o.config
        .tools
        .register(def, Arc::new(ChattyTool { n: 12_000 }));
    let host = Host::start(&home).await.unwrap();
    let s = host.create_session(o).await.unwrap();
    let mut lazy = s.subscribe().await.unwrap();
    let mut eager = s.subscribe().await.unwrap();
    let counter = tokio::spawn(async move {
        let mut seen = 0usize;
        while let Some(m) = eager.recv().await {
            assert!(
                !matches!(m.as_event(), Some(EventPayload::MessagesDropped { .. })),
                "a reader that keeps up lost messages"
            );
            seen += 1;
            if matches!(m.as_event(), Some(EventPayload::TaskEnd { .. })) {
                break;
            }
        }
        seen
    });
    let summary = s.run_task("go").await.unwrap();
    assert_eq!(summary.status, StopReason::Completed);
    let total = counter.await.unwrap();
    assert!(total > 12_000, "{total} messages streamed");
    assert!(
        lazy.high_water() <= SUBSCRIBER_CAPACITY,
        "{}",
        lazy.high_water()
    );
    let (mut received, mut dropped, mut markers) = (0usize, 0u64, 0);
    while let Ok(m) = lazy.try_recv() {
        match m.as_event() {
            Some(EventPayload::MessagesDropped { count, .. }) => {
                dropped += count;
                markers += 1;
            }
            _ => received += 1,
        }
    }
    assert_eq!(markers, 1, "one marker before the newest messages");
    assert!(received <= SUBSCRIBER_CAPACITY);
    assert_eq!(received as u64 + dropped, total as u64);
    host.shutdown().await;
}
