//! The spinner of the terminal view: one line on stderr naming what the run waits for (the
//! model, a tool) with the time waited, e.g. `⠋ waiting for the model (3s)`.
//!
//! Shared (cheap clones) between the view that sets it and the approval prompt that pauses it
//! while a question is on screen. It also tells the prompt which tool calls the view has shown,
//! so a question never appears before the line of the call it asks about. It owns no text of the transcript and never writes to stdout;
//! whoever writes to the terminal clears it first (`set(None)`) or writes inside [`StatusLine::suspend`].

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::Notify;

/// How often the spinner redraws.
const TICK: Duration = Duration::from_millis(100);

/// Characters of a spinner message kept (a tool name comes from the model).
const MAX_MESSAGE: usize = 60;

/// Ids of the tool calls shown lately, kept for the approval prompt.
const SHOWN_CALLS: usize = 64;

#[derive(Default)]
struct Inner {
    /// False: nothing is ever drawn (not a terminal, `TERM=dumb`, after Ctrl-C).
    enabled: bool,
    /// What is waited for, shown or not.
    message: Option<String>,
    /// The spinner on screen.
    bar: Option<ProgressBar>,
    /// Open pauses (an approval question is on screen).
    paused: u32,
    /// The tool calls a view has shown, latest last; `None` when no view shows them.
    shown_calls: Option<VecDeque<String>>,
}

impl Inner {
    fn hide(&mut self) -> Option<Duration> {
        let bar = self.bar.take()?;
        let elapsed = bar.elapsed();
        bar.finish_and_clear();
        Some(elapsed)
    }

    fn draw(&mut self, elapsed: Duration) {
        let Some(message) = &self.message else {
            return;
        };
        if !self.enabled || self.paused > 0 || self.bar.is_some() {
            return;
        }
        let bar =
            ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()).with_elapsed(elapsed);
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            bar.set_style(style);
        }
        bar.set_message(message.clone());
        bar.enable_steady_tick(TICK);
        self.bar = Some(bar);
    }
}

/// The spinner line (disabled ones draw nothing).
#[derive(Clone, Default)]
pub struct StatusLine {
    inner: Arc<Mutex<Inner>>,
    call_shown: Arc<Notify>,
}

impl StatusLine {
    /// A spinner that draws on stderr when `enabled`.
    pub fn new(enabled: bool) -> Self {
        StatusLine {
            inner: Arc::new(Mutex::new(Inner {
                enabled,
                ..Inner::default()
            })),
            call_shown: Arc::default(),
        }
    }

    /// A spinner that never draws.
    pub fn disabled() -> Self {
        StatusLine::new(false)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned lock only means a panic elsewhere mid-update; the state is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Shows `message` with a fresh elapsed time (kept when the message is unchanged), or clears
    /// the line (`None`) so the caller may write where it was.
    pub fn set(&self, message: Option<String>) {
        let mut inner = self.lock();
        let message = message.map(|m| {
            let mut m: String = m.chars().take(MAX_MESSAGE).collect();
            m = super::terminal_text::escape_controls(&m).replace('\n', " ");
            m
        });
        if inner.message == message {
            return;
        }
        inner.hide();
        inner.message = message;
        inner.draw(Duration::ZERO);
    }

    /// Runs `write` with the spinner off the screen, then draws it again with its elapsed time.
    pub fn suspend<R>(&self, write: impl FnOnce() -> R) -> R {
        let mut inner = self.lock();
        match inner.hide() {
            Some(elapsed) => {
                let r = write();
                inner.draw(elapsed);
                r
            }
            None => write(),
        }
    }

    /// Clears the spinner and never draws it again (Ctrl-C, the end of the run).
    pub fn stop(&self) {
        let mut inner = self.lock();
        inner.hide();
        inner.message = None;
        inner.enabled = false;
    }

    /// Clears the spinner until the returned guard is dropped (an approval question is on
    /// screen); it comes back with the time it had waited.
    pub fn pause(&self) -> Paused {
        let mut inner = self.lock();
        inner.paused += 1;
        let elapsed = inner.hide();
        Paused {
            line: self.clone(),
            message: inner.message.clone(),
            elapsed: elapsed.unwrap_or_default(),
        }
    }

    /// A view shows tool calls from now on: [`StatusLine::shown`] waits for them.
    pub fn track_calls(&self) {
        self.lock().shown_calls.get_or_insert_with(VecDeque::new);
    }

    /// The view has shown the line of tool call `id`.
    pub fn call_shown(&self, id: &str) {
        if let Some(calls) = &mut self.lock().shown_calls {
            if calls.len() >= SHOWN_CALLS {
                calls.pop_front();
            }
            calls.push_back(id.to_string());
        }
        self.call_shown.notify_waiters();
    }

    /// Waits (at most `limit`) until the view has shown tool call `id`; at once when no view
    /// shows calls.
    pub async fn shown(&self, id: &str, limit: Duration) {
        let wait = async {
            loop {
                let notified = self.call_shown.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                match &self.lock().shown_calls {
                    Some(calls) if !calls.iter().any(|c| c == id) => {}
                    _ => return,
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(limit, wait).await;
    }

    /// True while a spinner is on screen (for tests).
    pub fn is_drawn(&self) -> bool {
        self.lock().bar.is_some()
    }
}

/// A pause of the [`StatusLine`]; dropping it lets the spinner draw again.
pub struct Paused {
    line: StatusLine,
    /// What was waited for when the pause began, and for how long.
    message: Option<String>,
    elapsed: Duration,
}

impl Drop for Paused {
    fn drop(&mut self) {
        let mut inner = self.line.lock();
        inner.paused = inner.paused.saturating_sub(1);
        // A new wait that began during the pause starts from zero.
        let elapsed = if inner.message == self.message {
            self.elapsed
        } else {
            Duration::ZERO
        };
        inner.draw(elapsed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paused_or_disabled_line_draws_nothing() {
        let off = StatusLine::disabled();
        off.set(Some("waiting".into()));
        assert!(!off.is_drawn());
        let on = StatusLine::new(true);
        on.set(Some("waiting".into()));
        assert!(on.is_drawn());
        let pause = on.pause();
        assert!(!on.is_drawn());
        on.set(Some("running x".into()));
        assert!(!on.is_drawn(), "a pause holds across a new message");
        drop(pause);
        assert!(on.is_drawn());
        on.stop();
        on.set(Some("waiting".into()));
        assert!(!on.is_drawn(), "stopped for good");
    }

    #[tokio::test]
    async fn the_prompt_waits_for_the_call_line_only_when_a_view_shows_calls() {
        let line = StatusLine::new(true);
        let forever = Duration::from_secs(3600);
        line.shown("call_1", forever).await;
        line.track_calls();
        let waiter = {
            let line = line.clone();
            tokio::spawn(async move { line.shown("call_2", forever).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        line.call_shown("call_2");
        waiter.await.unwrap();
        let started = std::time::Instant::now();
        line.shown("call_3", Duration::from_millis(50)).await;
        assert!(
            started.elapsed() >= Duration::from_millis(50),
            "a missing call waits its limit"
        );
    }
}
