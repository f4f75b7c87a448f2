//! The idle reaper of a session's command registry: registered commands untouched for
//! `commands.idle_reap` (default 10 days, as PenguinHarness) are stopped and removed, each
//! reported as `command_evicted` with `status: reaped`. A read, a poll or new output of the
//! command counts as a touch; a command being read is never reaped.
//!
//! The reaper is a tick (`CommandSupervisorMsg::Sweep`) the supervisor sends itself; the sweep runs inside
//! the supervisor's `handle` and must not wait for anything.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ractor::ActorRef;

use super::{CommandEvent, CommandSupervisorMsg, CommandSupervisorState};

/// Shortest and longest pause between two sweeps.
const MIN_TICK: Duration = Duration::from_millis(50);
const MAX_TICK: Duration = Duration::from_secs(60);

/// The tick task; stopped when dropped (with the supervisor's state).
pub(super) struct Sweeper(tokio::task::JoinHandle<()>);

impl Drop for Sweeper {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Sweeper {
    /// Ticks every quarter of `idle_reap` (between 50 ms and 60 s), so a command is reaped at
    /// most a quarter late.
    pub(super) fn start(me: &ActorRef<CommandSupervisorMsg>, idle_reap: Duration) -> Sweeper {
        let every = (idle_reap / 4).clamp(MIN_TICK, MAX_TICK);
        let me = me.clone();
        Sweeper(tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                if me.cast(CommandSupervisorMsg::Sweep).is_err() {
                    return;
                }
            }
        }))
    }
}

impl CommandSupervisorState {
    /// Reaps the registered commands idle for `idle_reap`; output since the last sweep is a touch.
    pub(super) fn sweep(&mut self) {
        if self.disposed {
            return;
        }
        let limit = self.options.idle_reap;
        let now = Instant::now();
        let mut reaped = Vec::new();
        for (id, e) in self.entries.iter_mut().filter(|(_, e)| e.registered) {
            let outputs = e.outputs.load(Ordering::Relaxed);
            if outputs != e.seen_outputs {
                e.seen_outputs = outputs;
                e.last_used_at = now;
                continue;
            }
            if e.readers == 0 && now.duration_since(e.last_used_at) >= limit {
                reaped.push(id.clone());
            }
        }
        for id in reaped {
            if let Some(e) = self.entries.remove(&id) {
                tracing::debug!(session = %self.session_id, %id, "idle command reaped");
                e.actor.stop(Some("reaped".into()));
                (self.sink)(CommandEvent::Evicted {
                    process_id: id,
                    status: "reaped".to_string(),
                });
            }
        }
    }
}
