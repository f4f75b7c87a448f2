//! The floor of `--idle-sessions`: what one supervised ractor actor costs by itself on tokio, with
//! no state and no messages (its mailboxes, supervision ports, task and loop), measured in the
//! same process right after the idle sessions.
//!
//! It only spawns and stops its own empty actors; it never touches a session.

use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::measure;
use crate::error::RookeryError;

/// An actor with no state that handles nothing.
struct Empty;

/// The empty actor's one message (never sent).
#[derive(Debug)]
enum Nothing {}

impl Actor for Empty {
    type Msg = Nothing;
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        _args: (),
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(())
    }
}

/// The empty actors of one measurement: a parent and its `n` linked children.
pub(crate) struct EmptyActors {
    parent: ActorRef<Nothing>,
    children: Vec<ActorRef<Nothing>>,
    /// RSS before and after spawning the children, kB.
    pub rss_before_kb: u64,
    /// RSS after spawning the children, kB.
    pub rss_after_kb: u64,
}

impl EmptyActors {
    /// Spawns a parent, then `n` children linked to it (as sessions are to their host), and
    /// measures the RSS the children add.
    pub(crate) async fn spawn(n: usize) -> Result<Self, RookeryError> {
        let (parent, _) = Actor::spawn(None, Empty, ()).await?;
        let rss_before_kb = measure::current_rss_kb().unwrap_or(0);
        let mut children = Vec::with_capacity(n);
        for _ in 0..n {
            match Actor::spawn_linked(None, Empty, (), parent.get_cell()).await {
                Ok((child, _)) => children.push(child),
                Err(e) => {
                    parent.stop(None);
                    return Err(e.into());
                }
            }
        }
        let rss_after_kb = measure::current_rss_kb().unwrap_or(0);
        Ok(EmptyActors {
            parent,
            children,
            rss_before_kb,
            rss_after_kb,
        })
    }

    /// kB each child added.
    pub(crate) fn per_actor_kb(&self) -> f64 {
        let added = self.rss_after_kb.saturating_sub(self.rss_before_kb);
        if self.children.is_empty() {
            0.0
        } else {
            added as f64 / self.children.len() as f64
        }
    }

    /// Stops every child, then the parent.
    pub(crate) async fn stop(self) {
        for child in &self.children {
            child.stop(None);
        }
        self.parent.stop_and_wait(None, None).await.ok();
    }
}
