//! One `tools/call` request on a live connection, under an id this module knows: it is
//! cancelled on the server (`notifications/cancelled`) when the caller stops waiting, and it
//! fails at once, naming the limit, when a stdio server's answer to it was a line over the
//! transport's limit (which rmcp drops, see `stdio.rs`).
//!
//! It owns no timeout, no liveness check and no conversion of the result (`tool.rs` does).

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, RequestId, ServerResult,
};
use rmcp::service::{PeerRequestOptions, RoleClient};
use rmcp::{Peer, ServiceError};
use tokio::sync::broadcast::error::RecvError;

use super::client::McpError;
use super::stdio::{LINE_LIMIT, StdoutWatch};

/// The text of a call whose answer was over the line limit.
pub(crate) fn oversized_text(limit: usize) -> String {
    format!(
        "the server's answer is larger than the {} MiB message limit of the stdio transport and was dropped; ask for less at a time",
        limit / (1024 * 1024)
    )
}

/// Sends `tools/call` and waits for its answer.
pub(crate) async fn call_tool(
    peer: &Peer<RoleClient>,
    params: CallToolRequestParams,
    stdout: Option<&StdoutWatch>,
) -> Result<CallToolResult, McpError> {
    // Subscribed before sending: a report about this call's answer cannot be missed.
    let mut reports = stdout.map(|w| w.oversized.subscribe());
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = peer
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await
        .map_err(service_error)?;
    let id = handle.id.clone();
    let mut guard = CancelOnDrop {
        peer: peer.clone(),
        id: Some(id.clone()),
    };
    let wanted = id.to_string();
    let too_big = async {
        let Some(reports) = reports.as_mut() else {
            return std::future::pending().await;
        };
        loop {
            match reports.recv().await {
                // A line without a readable id may be this call's answer too.
                Ok(o) if o.id.as_deref().is_none_or(|i| i == wanted) => return,
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return std::future::pending().await,
            }
        }
    };
    let outcome = tokio::select! {
        r = handle.await_response() => r.map_err(service_error),
        () = too_big => Err(McpError::Request(oversized_text(LINE_LIMIT))),
    };
    if outcome.is_ok() {
        guard.id = None;
    }
    match outcome? {
        ServerResult::CallToolResult(result) => Ok(result),
        // A result without `content` decodes as another variant.
        ServerResult::EmptyResult(_) => Ok(CallToolResult::default()),
        ServerResult::CustomResult(custom) => serde_json::from_value(custom.0)
            .map_err(|_| McpError::Request(ServiceError::UnexpectedResponse.to_string())),
        _ => Err(McpError::Request(
            ServiceError::UnexpectedResponse.to_string(),
        )),
    }
}

fn service_error(e: ServiceError) -> McpError {
    match e {
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => McpError::Closed,
        ServiceError::McpError(e) => {
            McpError::Request(format!("MCP error {}: {}", e.code.0, e.message))
        }
        other => McpError::Request(other.to_string()),
    }
}

/// Tells the server the call was abandoned unless disarmed (`id` taken).
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let peer = self.peer.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let reason = Some("request abandoned by the caller".to_string());
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(Some(id), reason))
                    .await;
            });
        }
    }
}
