//! `ApiApprover`: the asker behind a served session's `PolicyApprover`. Each question becomes
//! a pending approval (FIFO) with its own `approval_id` (`appr-N`, never reused by the server),
//! which an HTTP client answers by that id, or by tool call id when only one pending call has it
//! (a parent and its subagents count their tool call ids separately, so ids can collide).
//!
//! It only holds questions and their reply channels: it never decides by itself, except that
//! everything pending is denied on abort and close (and anything asked after close is denied).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::sync::oneshot;

use crate::approval::{Answer, ApprovalRequest, Approver};
use crate::message::Decision;

struct Pending {
    approval_id: String,
    request: ApprovalRequest,
    reply: oneshot::Sender<Answer>,
}

/// One question waiting for an answer, as listed by the API.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingApproval {
    /// The id the API answers it by (`POST …/approvals/{approval_id}`).
    pub approval_id: String,
    /// The call waiting.
    pub request: ApprovalRequest,
}

/// What became of a decision.
#[derive(Debug, PartialEq)]
pub enum Decided {
    /// The one approval named was answered.
    Answered,
    /// No pending approval has this approval id or tool call id.
    NotFound,
    /// Several pending approvals have this tool call id; nothing was decided.
    Ambiguous(Vec<PendingApproval>),
}

/// Answers whose principal the gate has not asked for yet, at most this many (the oldest go).
const ANSWERED_KEPT: usize = 256;

#[derive(Default)]
struct Inner {
    queue: VecDeque<Pending>,
    closed: bool,
    /// `(tool_call_id, principal)` of answers given by a named principal, until the gate
    /// reads them ([`Approver::answered_by`]).
    answered: VecDeque<(String, String)>,
}

impl Inner {
    /// Forgets questions nobody waits for any more (the session dropped the approval).
    fn prune(&mut self) {
        self.queue.retain(|p| !p.reply.is_closed());
    }
}

/// Told about each question as it starts waiting (the webhooks).
type OnWait = Box<dyn Fn(&PendingApproval) + Send + Sync>;

/// Pending approvals of one session, answered through the API.
#[derive(Default)]
pub struct ApiApprover {
    inner: Mutex<Inner>,
    /// Numbers the approval ids; shared by every session of a server.
    counter: Arc<AtomicU64>,
    on_wait: Mutex<Option<OnWait>>,
}

impl ApiApprover {
    /// An approver with no question pending.
    pub fn new() -> Self {
        Self::default()
    }

    /// An approver numbering its approvals from a counter shared with others.
    pub fn with_counter(counter: Arc<AtomicU64>) -> Self {
        ApiApprover {
            inner: Mutex::default(),
            counter,
            on_wait: Mutex::default(),
        }
    }

    /// Calls `f` with each question as it starts waiting (after it is listed), never under the
    /// approver's own lock; `f` must not block.
    pub fn on_wait(&self, f: impl Fn(&PendingApproval) + Send + Sync + 'static) {
        if let Ok(mut slot) = self.on_wait.lock() {
            *slot = Some(Box::new(f));
        }
    }

    /// The questions waiting for an answer, oldest first.
    pub fn pending(&self) -> Vec<PendingApproval> {
        let Ok(mut inner) = self.inner.lock() else {
            return Vec::new();
        };
        inner.prune();
        inner
            .queue
            .iter()
            .map(|p| PendingApproval {
                approval_id: p.approval_id.clone(),
                request: p.request.clone(),
            })
            .collect()
    }

    /// How many questions wait.
    pub fn pending_count(&self) -> usize {
        self.inner.lock().map_or(0, |mut inner| {
            inner.prune();
            inner.queue.len()
        })
    }

    /// Answers the approval with this `approval_id`, or else the only pending approval with
    /// this tool call id; several with that tool call id are ambiguous and none is answered.
    pub fn decide(&self, key: &str, decision: Decision) -> Decided {
        self.answer_by(key, Answer::bare(decision), None)
    }

    /// [`ApiApprover::decide`] with the answerer's reason (the model is told a denial's).
    pub fn answer_with(&self, key: &str, answer: Answer) -> Decided {
        self.answer_by(key, answer, None)
    }

    /// [`ApiApprover::answer_with`] by principal `by`, which the decision's record names
    /// (`decided_by`).
    pub fn answer_by(&self, key: &str, answer: Answer, by: Option<&str>) -> Decided {
        let Ok(mut inner) = self.inner.lock() else {
            return Decided::NotFound;
        };
        inner.prune();
        let pos = match inner.queue.iter().position(|p| p.approval_id == key) {
            Some(pos) => pos,
            None => {
                let same: Vec<usize> = (0..inner.queue.len())
                    .filter(|&i| inner.queue[i].request.tool_call_id == key)
                    .collect();
                match same.as_slice() {
                    [] => return Decided::NotFound,
                    [one] => *one,
                    many => {
                        return Decided::Ambiguous(
                            many.iter()
                                .map(|&i| PendingApproval {
                                    approval_id: inner.queue[i].approval_id.clone(),
                                    request: inner.queue[i].request.clone(),
                                })
                                .collect(),
                        );
                    }
                }
            }
        };
        match inner.queue.remove(pos) {
            Some(p) => {
                if let Some(by) = by {
                    if inner.answered.len() >= ANSWERED_KEPT {
                        inner.answered.pop_front();
                    }
                    let id = p.request.tool_call_id.clone();
                    inner.answered.push_back((id, by.to_string()));
                }
                match p.reply.send(answer) {
                    Ok(()) => Decided::Answered,
                    Err(_) => Decided::NotFound,
                }
            }
            None => Decided::NotFound,
        }
    }

    /// Denies every pending question (abort); returns how many were waiting.
    pub fn deny_all(&self) -> usize {
        let Ok(mut inner) = self.inner.lock() else {
            return 0;
        };
        let mut n = 0;
        for p in inner.queue.drain(..) {
            if p.reply.send(Answer::bare(Decision::Deny)).is_ok() {
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
        let answer = self.answer(request, false);
        Box::pin(async move { answer.await.decision })
    }

    fn answer(&self, request: ApprovalRequest, _ask: bool) -> BoxFuture<'static, Answer> {
        let (tx, rx) = oneshot::channel();
        let waiting = match self.inner.lock() {
            Ok(mut inner) if !inner.closed => {
                let n = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
                let waiting = PendingApproval {
                    approval_id: format!("appr-{n}"),
                    request,
                };
                inner.queue.push_back(Pending {
                    approval_id: waiting.approval_id.clone(),
                    request: waiting.request.clone(),
                    reply: tx,
                });
                waiting
            }
            _ => return Box::pin(async { Answer::bare(Decision::Deny) }),
        };
        if let Ok(f) = self.on_wait.lock()
            && let Some(f) = f.as_ref()
        {
            f(&waiting);
        }
        Box::pin(async move { rx.await.unwrap_or(Answer::bare(Decision::Deny)) })
    }

    fn decided_by(&self, _request: &ApprovalRequest, _asked: bool) -> &'static str {
        "api"
    }

    fn answered_by(&self, tool_call_id: &str) -> Option<String> {
        let mut inner = self.inner.lock().ok()?;
        let pos = inner
            .answered
            .iter()
            .position(|(id, _)| id == tool_call_id)?;
        inner.answered.remove(pos).map(|(_, by)| by)
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
        let ids: Vec<(String, String)> = a
            .pending()
            .into_iter()
            .map(|p| (p.approval_id, p.request.tool_call_id))
            .collect();
        assert_eq!(
            ids,
            [
                ("appr-1".to_string(), "call_0".to_string()),
                ("appr-2".to_string(), "call_1".to_string())
            ]
        );
        assert_eq!(a.decide("call_9", Decision::Allow), Decided::NotFound);
        assert_eq!(a.decide("call_1", Decision::Deny), Decided::Answered);
        assert_eq!(a.decide("appr-1", Decision::Allow), Decided::Answered);
        assert_eq!(f0.await, Decision::Allow);
        assert_eq!(f1.await, Decision::Deny);
        assert_eq!(a.pending_count(), 0);
        assert_eq!(a.decide("call_0", Decision::Allow), Decided::NotFound);
    }

    #[tokio::test]
    async fn colliding_tool_call_ids_need_the_approval_id() {
        let counter = Arc::new(AtomicU64::new(0));
        let parent = ApiApprover::with_counter(counter.clone());
        let mut child_req = req("call_1");
        child_req.origin = vec!["session-child".into()];
        let f_parent = parent.approve(req("call_1"));
        let f_child = parent.approve(child_req);
        let Decided::Ambiguous(list) = parent.decide("call_1", Decision::Allow) else {
            panic!("not ambiguous");
        };
        let ids: Vec<&str> = list.iter().map(|p| p.approval_id.as_str()).collect();
        assert_eq!(ids, ["appr-1", "appr-2"]);
        assert_eq!(parent.pending_count(), 2);
        assert_eq!(parent.decide("appr-2", Decision::Allow), Decided::Answered);
        assert_eq!(f_child.await, Decision::Allow);
        // Now only one call_1 is pending: the bare id names it.
        assert_eq!(parent.decide("call_1", Decision::Deny), Decided::Answered);
        assert_eq!(f_parent.await, Decision::Deny);
        // Another approver on the same counter never reuses an id.
        let other = ApiApprover::with_counter(counter);
        let _f = other.approve(req("call_0"));
        assert_eq!(other.pending()[0].approval_id, "appr-3");
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
