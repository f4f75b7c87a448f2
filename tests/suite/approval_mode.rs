//! The approval mode through the library: `Host::resume_session` restores the recorded mode of
//! an `inherited` policy, keeps the mode of a `new` one (recording the change), and a second
//! host in the same process cannot open a session another host holds open.

use crate::common;

use std::sync::Arc;

use common::*;
use rookery::approval::{ApprovalMode, DenyAllApprover, PolicyApprover};
use rookery::message::{EventPayload, Payload};
use rookery::{Host, RookeryError};
use serde_json::json;

fn modes(path: &std::path::Path) -> Vec<String> {
    trace_records(path)
        .iter()
        .filter_map(|r| match &r.payload {
            Payload::SessionMeta(m) => m.approval_mode.clone(),
            Payload::Event(EventPayload::ApprovalModeChanged { mode }) => Some(mode.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_restores_or_overrides_the_recorded_mode() {
    let (_dir, ws, home) = tempdirs();
    let host = Host::start(&home).await.unwrap();
    let model = scripted(json!({"turns": []}));
    let policy = Arc::new(PolicyApprover::new(
        ApprovalMode::ReadOnly,
        Arc::new(DenyAllApprover),
    ));
    let mut o = options(&ws, model.clone());
    o.approver = policy.clone();
    let s = host.create_session(o).await.unwrap();
    let id = s.id().to_string();
    let path = s.trace_path().to_path_buf();
    policy.set_mode(ApprovalMode::DenyAll);
    // The change is recorded by the session (asynchronously): wait for it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while modes(&path) != ["read-only", "deny-all"] {
        assert!(std::time::Instant::now() < deadline, "{:?}", modes(&path));
        s.flush_trace().await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }

    // A second host (another owner) is refused while the first has it open.
    let other = Host::start(&home).await.unwrap();
    let refused = other.resume_session(&id, options(&ws, model.clone())).await;
    match refused {
        Err(RookeryError::SessionLocked { id: locked, pid }) => {
            assert_eq!(locked, id);
            assert_eq!(pid, Some(std::process::id()));
        }
        other => panic!("expected SessionLocked, got {other:?}"),
    }
    s.close().await.unwrap();

    // Inherited: the recorded mode comes back, nothing new is recorded.
    let inherited = Arc::new(PolicyApprover::inherited(
        ApprovalMode::AllowAll,
        Arc::new(DenyAllApprover),
    ));
    let mut o = options(&ws, model.clone());
    o.approver = inherited.clone();
    let s = other.resume_session(&id, o).await.unwrap();
    assert_eq!(inherited.mode(), ApprovalMode::DenyAll);
    s.close().await.unwrap();
    assert_eq!(modes(&path), ["read-only", "deny-all"]);

    // Chosen by the caller: kept, and recorded.
    let chosen = Arc::new(PolicyApprover::new(
        ApprovalMode::AlwaysAsk,
        Arc::new(DenyAllApprover),
    ));
    let mut o = options(&ws, model);
    o.approver = chosen.clone();
    let s = other.resume_session(&id, o).await.unwrap();
    assert_eq!(chosen.mode(), ApprovalMode::AlwaysAsk);
    s.close().await.unwrap();
    assert_eq!(modes(&path), ["read-only", "deny-all", "always-ask"]);
    host.shutdown().await;
    other.shutdown().await;
}
