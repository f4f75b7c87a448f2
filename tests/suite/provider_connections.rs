//! The OpenAI-compatible client's connections against a raw keep-alive HTTP/1.1 server on
//! 127.0.0.1:0 that sends each answer's chunked terminator a while after `data: [DONE]` (as a
//! server that flushes every event does): the answer ends at `[DONE]`, and the connection is
//! still used again for the next request rather than closed.

use crate::common::replay::server::read_request;
use crate::common::user_text_request;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use rookery::message::StopReason;
use rookery::model::model_config::ModelConfig;
use rookery::model::openai::OpenAiModel;
use rookery::model::{Model, ModelEvent, ModelSessionContext};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

const ANSWER: &str = concat!(
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"done\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
);

/// How long after `[DONE]` the terminator comes.
const TERMINATOR_AFTER: Duration = Duration::from_millis(30);

/// Serves every request on every connection with [`ANSWER`], its terminator sent
/// [`TERMINATOR_AFTER`] later; counts the connections and reports each terminator written.
async fn serve(accepts: Arc<AtomicUsize>, written: mpsc::UnboundedSender<()>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            accepts.fetch_add(1, Ordering::SeqCst);
            let written = written.clone();
            tokio::spawn(async move {
                let _ = socket.set_nodelay(true);
                while read_request(&mut socket).await.is_some() {
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                                transfer-encoding: chunked\r\n\r\n";
                    let chunk = format!("{head}{:x}\r\n{ANSWER}\r\n", ANSWER.len());
                    if socket.write_all(chunk.as_bytes()).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(TERMINATOR_AFTER).await;
                    if socket.write_all(b"0\r\n\r\n").await.is_err() {
                        return;
                    }
                    let _ = written.send(());
                }
            });
        }
    });
    format!("http://{addr}/v1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminator_after_done_keeps_the_connection_for_the_next_request() {
    let accepts = Arc::new(AtomicUsize::new(0));
    let (tx, mut written) = mpsc::unbounded_channel();
    let base_url = serve(accepts.clone(), tx).await;
    let model = OpenAiModel::new(ModelConfig::openai(base_url, "m")).unwrap();
    const REQUESTS: usize = 3;
    for _ in 0..REQUESTS {
        let mut session = model.open(&ModelSessionContext::default());
        let events: Vec<ModelEvent> = tokio::time::timeout(
            Duration::from_secs(30),
            session.stream(user_text_request("hi")).collect(),
        )
        .await
        .expect("the answer ends at [DONE], not at the terminator");
        match events.last() {
            Some(ModelEvent::End(outcome)) => assert_eq!(outcome.status, StopReason::Completed),
            other => panic!("no end: {other:?}"),
        }
        // The server has written the terminator; the client's connection task needs a moment
        // to read it and hand the connection back to the pool (generous: a loaded machine).
        written.recv().await.unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // A body dropped at `[DONE]` would have closed each connection: one per request.
    assert_eq!(accepts.load(Ordering::SeqCst), 1);
}
