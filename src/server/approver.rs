//! `ApiApprover`: the asker behind a served session's `PolicyApprover`. Each question becomes
//! a pending approval (FIFO) that an HTTP client answers by tool call id.
//!
//! It only holds questions and their reply channels: it never decides by itself, except that
//! everything pending is denied on abort and close (and anything asked after close is denied).

use std::collections::VecDeque;
use std::sync::Mutex;

use futures::future::BoxFuture;
use tokio::sync::oneshot;

use crate::approval::{ApprovalRequest, Approver};
use crate::message::Decision;

struct Pending {
    request: ApprovalRequest,
    reply: oneshot::Sender<Decision>,
}

#[derive(Default)]
struct Inner {
    queue: VecDeque<Pending>,
    closed: bool,
}

impl Inner {
    /// Forgets questions nobody waits for any more (the session dropped the approval).
    fn prune(&mut self) {
        self.queue.retain(|p| !p.reply.is_closed());
    }
}

/// Pending approvals of one session, answered through the API.
#[derive(Default)]
pub struct ApiApprover {
    inner: Mutex<Inner>,
}

impl ApiApprover {
    pub fn new() -> Self {
        Self::default()
    }

    /// The questions waiting for an answer, oldest first.
    pub fn pending(&self) -> Vec<ApprovalRequest> {
        let Ok(mut inner) = self.inner.lock() else {
            return Vec::new();
        };
        inner.prune();
        inner.queue.iter().map(|p| p.request.clone()).collect()
    }

    /// How many questions wait.
    pub fn pending_count(&self) -> usize {
        self.inner.lock().map_or(0, |mut inner| {
            inner.prune();
            inner.queue.len()
        })
    }

    /// Answers the oldest pending question with this tool call id; false when there is none.
    pub fn decide(&self, tool_call_id: &str, decision: Decision) -> bool {
        let Ok(mut inner) = self.inner.lock() else {
            return false;
        };
        inner.prune();
        let Some(pos) = inner
            .queue
            .iter()
            .position(|p| p.request.tool_call_id == tool_call_id)
        else {
            return false;
        };
        match inner.queue.remove(pos) {
            Some(p) => p.reply.send(decision).is_ok(),
            None => false,
        }
    }

    /// Denies every pending question (abort); returns how many were waiting.
    pub fn deny_all(&self) -> usize {
        let Ok(mut inner) = self.inner.lock() else {
            return 0;
        };
        let mut n = 0;
        for p in inner.queue.drain(..) {
            if p.reply.send(Decision::Deny).is_ok() {
                n += 1;
            }
        }
        n
    }

    /// Denies everything pending and everything asked from now on (session closed).
    pub fn close(&self) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.closed = true;
        }
        self.deny_all();
    }
}

impl Approver for ApiApprover {
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Decision> {
        let (tx, rx) = oneshot::channel();
        match self.inner.lock() {
            Ok(mut inner) if !inner.closed => inner.queue.push_back(Pending { request, reply: tx }),
            _ => return Box::pin(async { Decision::Deny }),
        }
        Box::pin(async move { rx.await.unwrap_or(Decision::Deny) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: &str) -> ApprovalRequest {
        ApprovalRequest {
            tool_call_id: id.into(),
            name: "read_file".into(),
            arguments: "{\"file_path\":\"a\"}".into(),
            permission: None,
            origin: vec![],
        }
    }

    #[tokio::test]
    async fn answers_reach_the_asker_in_fifo_order() {
        let a = ApiApprover::new();
        let f0 = a.approve(req("call_0"));
        let f1 = a.approve(req("call_1"));
        let ids: Vec<String> = a.pending().into_iter().map(|r| r.tool_call_id).collect();
        assert_eq!(ids, ["call_0", "call_1"]);
        assert!(!a.decide("call_9", Decision::Allow));
        assert!(a.decide("call_1", Decision::Deny));
        assert!(a.decide("call_0", Decision::Allow));
        assert_eq!(f0.await, Decision::Allow);
        assert_eq!(f1.await, Decision::Deny);
        assert_eq!(a.pending_count(), 0);
        assert!(!a.decide("call_0", Decision::Allow));
    }

    #[tokio::test]
    async fn dropped_questions_vanish_and_close_denies_everything() {
        let a = ApiApprover::new();
        drop(a.approve(req("call_0")));
        assert_eq!(a.pending_count(), 0);
        let f1 = a.approve(req("call_1"));
        assert_eq!(a.deny_all(), 1);
        assert_eq!(f1.await, Decision::Deny);
        let f2 = a.approve(req("call_2"));
        a.close();
        assert_eq!(f2.await, Decision::Deny);
        assert_eq!(a.approve(req("call_3")).await, Decision::Deny);
        assert!(a.pending().is_empty());
    }
}
