//! The stdout of a stdio MCP server, watched for lines over the transport's line limit.
//!
//! rmcp drops a line longer than [`LINE_LIMIT`] without a word, so the call that line answered
//! would wait its whole `timeoutMs`. [`Watched`] passes every byte through to rmcp unchanged and
//! reports each such line as an [`Oversized`], with the JSON-RPC `id` it carried when one was
//! found at its top level, so `call.rs` can fail that call at once. It also counts the bytes
//! read: a server whose ping answer waits behind a flood of its own messages is still alive
//! (`tool.rs`). It never buffers a line, parses a message (rmcp does) or decides what a call
//! answers.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::broadcast;

/// The longest line (newline included) rmcp's stdio transport accepts: 16 MiB.
pub const LINE_LIMIT: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// A line of the server's stdout that rmcp dropped for its length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Oversized {
    /// The line's top-level JSON-RPC `id` (a number's digits or a string's text), if found.
    pub id: Option<String>,
}

/// What the watch of one server's stdout tells the calls on its connection.
#[derive(Debug, Clone)]
pub struct StdoutWatch {
    /// Lines over the limit; each call subscribes while it waits (a handful of reports can
    /// queue; a lagging receiver sees `Lagged` and goes on).
    pub oversized: broadcast::Sender<Oversized>,
    /// Bytes read from the server so far.
    pub bytes: Arc<AtomicU64>,
}

impl StdoutWatch {
    /// A watch with no report and no byte read yet.
    pub fn new() -> Self {
        StdoutWatch {
            oversized: broadcast::channel(16).0,
            bytes: Arc::default(),
        }
    }

    /// Bytes read from the server so far.
    pub fn read(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

impl Default for StdoutWatch {
    fn default() -> Self {
        Self::new()
    }
}

/// The server's stdout, passed through, with its lines measured.
pub struct Watched<R> {
    inner: R,
    watch: StdoutWatch,
    /// Bytes of the current line so far.
    line: usize,
    /// The current line was already reported.
    reported: bool,
    scan: IdScan,
}

impl<R> Watched<R> {
    /// Wraps `inner`, the server's stdout, reporting to `watch`.
    pub fn new(inner: R, watch: StdoutWatch) -> Self {
        Watched {
            inner,
            watch,
            line: 0,
            reported: false,
            scan: IdScan::default(),
        }
    }

    fn report(&mut self) {
        if !self.reported {
            self.reported = true;
            let id = self.scan.found.clone();
            tracing::warn!(
                id = id.as_deref().unwrap_or("?"),
                limit = LINE_LIMIT,
                "an MCP server sent a message over the line limit; it is dropped"
            );
            let _ = self.watch.oversized.send(Oversized { id });
        }
    }

    fn observe(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        while !rest.is_empty() {
            let newline = rest.iter().position(|b| *b == b'\n');
            let (part, next) = match newline {
                Some(i) => (&rest[..i], &rest[i + 1..]),
                None => (rest, &[][..]),
            };
            self.scan.feed(part);
            self.line = self.line.saturating_add(part.len());
            match newline {
                Some(_) => {
                    // rmcp counts the newline.
                    if self.line.saturating_add(1) > LINE_LIMIT {
                        self.report();
                    }
                    self.line = 0;
                    self.reported = false;
                    self.scan = IdScan::default();
                }
                // Over the limit with the id known: no need to wait for the line's end.
                None if self.line > LINE_LIMIT && self.scan.found.is_some() => self.report(),
                None => {}
            }
            rest = next;
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Watched<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            let new = &buf.filled()[before..];
            this.watch
                .bytes
                .fetch_add(new.len() as u64, Ordering::Relaxed);
            if new.is_empty() && this.line > LINE_LIMIT {
                // End of stream inside an oversized line.
                this.report();
            }
            this.observe(new);
        }
        polled
    }
}

/// Finds the top-level `"id"` of one JSON object streamed in pieces, wherever it is in the
/// object, keeping only a few bytes (the current key and the id's text).
#[derive(Default)]
struct IdScan {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// At depth 1, the next string is a key.
    want_key: bool,
    key: Option<Vec<u8>>,
    /// The key just read, waiting for its `:`.
    key_done: Option<Vec<u8>>,
    /// The `id` value being read.
    value: Option<Vec<u8>>,
    found: Option<String>,
}

/// Longest key kept (longer keys are not `id`) and longest id text kept.
const KEY_MAX: usize = 8;
const ID_MAX: usize = 256;

impl IdScan {
    fn feed(&mut self, bytes: &[u8]) {
        if self.found.is_some() {
            return;
        }
        for &b in bytes {
            self.byte(b);
        }
    }

    fn byte(&mut self, b: u8) {
        if let Some(v) = &mut self.value
            && v.len() < ID_MAX
            && (self.in_string || !b.is_ascii_whitespace())
            && !(self.depth == 1 && !self.in_string && (b == b',' || b == b'}'))
        {
            v.push(b);
        }
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if let Some(key) = self.key.take() {
                    self.key_done = Some(key);
                }
            } else if let Some(key) = &mut self.key
                && key.len() <= KEY_MAX
            {
                key.push(b);
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.want_key {
                    self.want_key = false;
                    self.key = Some(Vec::new());
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                if self.depth == 1 {
                    self.want_key = b == b'{';
                }
            }
            b'}' | b']' => {
                if self.depth == 1 {
                    self.finish_value();
                }
                self.depth = self.depth.saturating_sub(1);
            }
            b':' if self.depth == 1 => self.colon(),
            b',' if self.depth == 1 => {
                self.finish_value();
                self.want_key = true;
            }
            _ => {}
        }
    }

    /// A `:` at the top level: the value of the key just read follows.
    fn colon(&mut self) {
        if self.key_done.take().as_deref() == Some(b"id".as_slice()) {
            self.value = Some(Vec::new());
        }
    }

    fn finish_value(&mut self) {
        let Some(raw) = self.value.take() else {
            return;
        };
        let text = String::from_utf8_lossy(&raw);
        let text = text.trim();
        let text = text
            .strip_prefix('"')
            .and_then(|t| t.strip_suffix('"'))
            .unwrap_or(text);
        if !text.is_empty() && text != "null" {
            self.found = Some(text.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id_of(line: &str, piece: usize) -> Option<String> {
        let mut scan = IdScan::default();
        for chunk in line.as_bytes().chunks(piece) {
            scan.feed(chunk);
        }
        scan.found
    }

    #[test]
    fn the_top_level_id_is_found_wherever_it_is() {
        for piece in [1, 3, 1000] {
            assert_eq!(
                id_of(r#"{"jsonrpc":"2.0","id":17,"result":{"id":3}}"#, piece).as_deref(),
                Some("17")
            );
            assert_eq!(
                id_of(
                    r#"{"result":{"content":[{"id":"x","t":"a,}\"id\":9"}]},"jsonrpc":"2.0","id" : "req-2" }"#,
                    piece
                )
                .as_deref(),
                Some("req-2")
            );
            assert_eq!(
                id_of(r#"{"method":"notifications/x","params":{"id":4}}"#, piece),
                None
            );
            assert_eq!(id_of(r#"{"identity":1,"id":null}"#, piece), None);
        }
    }

    #[tokio::test]
    async fn an_oversized_line_is_reported_once_with_its_id() {
        use tokio::io::AsyncReadExt;
        let watch = StdoutWatch::new();
        let mut rx = watch.oversized.subscribe();
        let big = "x".repeat(LINE_LIMIT);
        let text = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{}}}}\n{{\"result\":\"{big}\",\"id\":2}}\n{{\"id\":3}}\n"
        );
        let mut watched = Watched::new(text.as_bytes(), watch.clone());
        let mut out = Vec::new();
        watched.read_to_end(&mut out).await.unwrap_or_default();
        assert_eq!(out.len(), text.len(), "every byte passes");
        assert_eq!(watch.read(), text.len() as u64);
        assert_eq!(
            rx.try_recv().ok(),
            Some(Oversized {
                id: Some("2".into())
            })
        );
        assert!(rx.try_recv().is_err());
    }
}
