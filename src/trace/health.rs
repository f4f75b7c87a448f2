//! `TraceHealth`: whether one session's trace can still be written, and which file it is
//! written to now, shared by its trace actor (which reports the first failed write or sync, and
//! the file a rotation switched to) and its session and handle (which stop taking tasks, and
//! name the current file).
//!
//! It holds the first failure text only, `trace write failed: <reason> (<path>)`, and calls
//! the listener the session registered, once. It must not retry, repair or write anything.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, RwLock};

type Listener = Box<dyn Fn(&str) + Send + Sync>;
type Fence = Box<dyn Fn() -> Option<String> + Send + Sync>;

/// The health of one trace.
#[derive(Default)]
pub struct TraceHealth {
    failure: OnceLock<String>,
    listener: Mutex<Option<Listener>>,
    /// The file records go to now (`_001`, then `_002`, … after each rotation).
    current: RwLock<Option<PathBuf>>,
    /// Whether the writer still owns the trace (a store's lease), asked before a tool runs.
    fence: OnceLock<Fence>,
}

impl std::fmt::Debug for TraceHealth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceHealth")
            .field("failure", &self.failure.get())
            .finish()
    }
}

/// An I/O error's reason without Rust's ` (os error N)` suffix, e.g. `No space left on device`.
pub fn io_reason(e: &io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(i) if text.ends_with(')') => text[..i].to_string(),
        _ => text,
    }
}

/// The text of a failed write: `trace write failed: <reason> (<path>)`.
pub fn failure_text(e: &io::Error, path: &Path) -> String {
    format!("trace write failed: {} ({})", io_reason(e), path.display())
}

impl TraceHealth {
    /// Records a failure. Only the first one is kept and reported to the listener; returns
    /// whether this was it.
    pub fn fail(&self, text: String) -> bool {
        if self.failure.set(text).is_err() {
            return false;
        }
        if let (Ok(listener), Some(text)) = (self.listener.lock(), self.failure.get())
            && let Some(f) = listener.as_ref()
        {
            f(text);
        }
        true
    }

    /// The first failure, if any.
    pub fn failure(&self) -> Option<&str> {
        self.failure.get().map(String::as_str)
    }

    /// Records the file the trace is written to from now on.
    pub fn set_current(&self, path: PathBuf) {
        if let Ok(mut current) = self.current.write() {
            *current = Some(path);
        }
    }

    /// The file the trace is written to now, once known.
    pub fn current(&self) -> Option<PathBuf> {
        self.current.read().ok().and_then(|c| c.clone())
    }

    /// Sets the check of whether this process still owns the trace (a store's lease: `None`
    /// while it does, else why not). Set once; later calls are ignored.
    pub fn set_fence(&self, f: impl Fn() -> Option<String> + Send + Sync + 'static) {
        let _ = self.fence.set(Box::new(f));
    }

    /// Why this process no longer owns the trace, if the fence says so: the session then runs
    /// no further tool.
    pub fn fenced(&self) -> Option<String> {
        self.fence.get().and_then(|f| f())
    }

    /// Sets who hears of the first failure (at once, if it already happened).
    pub fn on_failure(&self, f: impl Fn(&str) + Send + Sync + 'static) {
        if let Ok(mut listener) = self.listener.lock() {
            if let Some(text) = self.failure.get() {
                f(text);
            }
            *listener = Some(Box::new(f));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn the_first_failure_is_kept_and_heard_once() {
        let h = TraceHealth::default();
        let heard = Arc::new(AtomicUsize::new(0));
        let n = heard.clone();
        h.on_failure(move |t| {
            assert!(t.starts_with("trace write failed: No space left on device (/x/t.jsonl)"));
            n.fetch_add(1, Ordering::SeqCst);
        });
        let e = io::Error::from_raw_os_error(libc::ENOSPC);
        assert!(h.fail(failure_text(&e, Path::new("/x/t.jsonl"))));
        assert!(!h.fail("second".into()));
        assert_eq!(heard.load(Ordering::SeqCst), 1);
        assert_eq!(
            h.failure(),
            Some("trace write failed: No space left on device (/x/t.jsonl)")
        );
    }

    #[test]
    fn the_fence_says_why_the_trace_is_no_longer_ours() {
        let h = TraceHealth::default();
        assert_eq!(h.fenced(), None);
        let lost = Arc::new(AtomicUsize::new(0));
        let l = lost.clone();
        h.set_fence(move || (l.load(Ordering::SeqCst) > 0).then(|| "moved".to_string()));
        assert_eq!(h.fenced(), None);
        lost.store(1, Ordering::SeqCst);
        assert_eq!(h.fenced().as_deref(), Some("moved"));
    }

    #[test]
    fn a_late_listener_hears_an_earlier_failure() {
        let h = TraceHealth::default();
        h.fail("trace write failed: Input/output error (/t)".into());
        let heard = Arc::new(AtomicUsize::new(0));
        let n = heard.clone();
        h.on_failure(move |_| {
            n.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(heard.load(Ordering::SeqCst), 1);
        assert_eq!(io_reason(&io::Error::other("plain")), "plain");
    }
}
