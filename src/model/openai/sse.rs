//! A linear-time Server-Sent Events framer: bytes in, the `data` of each complete event out.
//!
//! It owns line splitting (LF, CRLF and CR-only endings, also when a CRLF straddles two reads),
//! comment lines, multi-line `data`, a leading BOM, the size limit of one event, and the
//! trailing event of a body that ends without a blank line. Every byte is scanned once, so one
//! huge event costs time proportional to its size, and an event's data is lent to the caller
//! from one buffer the framer keeps (no allocation per event). It knows nothing of JSON or HTTP.

/// One event grew past the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("one event of the stream is larger than {limit} bytes")]
pub(super) struct EventTooLarge {
    pub(super) limit: usize,
}

/// The framer state of one event stream.
#[derive(Debug)]
pub(super) struct SseFramer {
    /// Bytes not yet split into lines (`buf[start..]`); `buf[..scan]` holds no line end.
    buf: Vec<u8>,
    scan: usize,
    /// The `data` lines of the event being assembled, each followed by `\n`.
    data: Vec<u8>,
    has_data: bool,
    /// The previous read ended in CR: an LF opening the next read belongs to it.
    after_cr: bool,
    at_start: bool,
    limit: usize,
}

impl SseFramer {
    /// A framer refusing events (and lines) longer than `limit` bytes.
    pub(super) fn new(limit: usize) -> Self {
        SseFramer {
            buf: Vec::new(),
            scan: 0,
            data: Vec::new(),
            has_data: false,
            after_cr: false,
            at_start: true,
            limit,
        }
    }

    /// Feeds one read; `out` gets the data of every event it completes, in order.
    pub(super) fn feed(
        &mut self,
        bytes: &[u8],
        out: &mut impl FnMut(&str),
    ) -> Result<(), EventTooLarge> {
        let mut bytes = bytes;
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
        }
        self.buf.extend_from_slice(bytes);
        if self.at_start {
            if self.buf.len() < 3 && b"\xEF\xBB\xBF".starts_with(&self.buf) {
                return Ok(());
            }
            self.at_start = false;
            if self.buf.starts_with(b"\xEF\xBB\xBF") {
                self.buf.drain(..3);
            }
        }
        let mut start = 0;
        let mut i = self.scan;
        // Line ends found with `memchr2` (a word or a vector at a time), not byte by byte.
        while let Some(at) = memchr::memchr2(b'\n', b'\r', &self.buf[i..]) {
            i += at;
            let b = self.buf[i];
            let line_end = i;
            i += 1;
            if b == b'\r' {
                if i < self.buf.len() {
                    if self.buf[i] == b'\n' {
                        i += 1;
                    }
                } else {
                    self.after_cr = true;
                }
            }
            // Lend the buffer out while the line is handled (no copy of the line).
            let line = std::mem::take(&mut self.buf);
            let result = self.line(&line[start..line_end], out);
            self.buf = line;
            result?;
            start = i;
        }
        // Only the unfinished last line stays: each byte is moved at most once more.
        if start > 0 {
            self.buf.drain(..start);
        }
        self.scan = self.buf.len();
        if self.buf.len() + self.data.len() > self.limit {
            return Err(EventTooLarge { limit: self.limit });
        }
        Ok(())
    }

    /// The body ended: a last line without its end and an event without its blank line count.
    pub(super) fn finish(&mut self, out: &mut impl FnMut(&str)) -> Result<(), EventTooLarge> {
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            self.line(&rest, out)?;
        }
        self.scan = 0;
        self.dispatch(out);
        Ok(())
    }

    fn line(&mut self, line: &[u8], out: &mut impl FnMut(&str)) -> Result<(), EventTooLarge> {
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(at) => {
                let value = &line[at + 1..];
                (&line[..at], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        if field == b"data" {
            if self.data.len() + value.len() + 1 > self.limit {
                return Err(EventTooLarge { limit: self.limit });
            }
            self.data.extend_from_slice(value);
            self.data.push(b'\n');
            self.has_data = true;
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut impl FnMut(&str)) {
        if !self.has_data {
            return;
        }
        self.has_data = false;
        let data = &self.data[..self.data.len().saturating_sub(1)];
        match std::str::from_utf8(data) {
            Ok(text) => out(text),
            Err(_) => out(&String::from_utf8_lossy(data)),
        }
        // The buffer is kept for the next event (a huge one's is given back).
        self.data.clear();
        if self.data.capacity() > 64 * 1024 {
            self.data = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(body: &[u8], piece: usize) -> Result<Vec<String>, EventTooLarge> {
        let mut f = SseFramer::new(1 << 20);
        let mut out = Vec::new();
        let mut push = |d: &str| out.push(d.to_string());
        for chunk in body.chunks(piece.max(1)) {
            f.feed(chunk, &mut push)?;
        }
        f.finish(&mut push)?;
        Ok(out)
    }

    fn all_splits(body: &[u8]) -> Vec<String> {
        let whole = frame(body, body.len()).unwrap_or_default();
        for piece in 1..body.len().max(2) {
            assert_eq!(frame(body, piece), Ok(whole.clone()), "piece {piece}");
        }
        whole
    }

    #[test]
    fn lf_crlf_and_cr_endings_frame_alike() {
        let want = vec!["a".to_string(), "b\nc".to_string(), "[DONE]".to_string()];
        for nl in ["\n", "\r\n", "\r"] {
            let body = format!("data: a{nl}{nl}data: b{nl}data:c{nl}{nl}data: [DONE]{nl}{nl}");
            assert_eq!(all_splits(body.as_bytes()), want, "{nl:?}");
        }
        // Mixed endings in one stream.
        assert_eq!(
            all_splits(b"data: a\r\n\ndata: b\rdata:c\n\r\ndata: [DONE]\r\r"),
            want
        );
    }

    #[test]
    fn comments_other_fields_bom_and_a_missing_last_blank_line() {
        let body = b"\xEF\xBB\xBF: keep-alive\nevent: x\nid: 7\nretry: 5\ndata: one\n\n: OPENROUTER PROCESSING\n\ndata: two";
        assert_eq!(all_splits(body), vec!["one", "two"]);
        assert_eq!(all_splits(b"data\n\n"), vec![""]);
        assert_eq!(all_splits(b"event: only\n\n: c\n\n"), Vec::<String>::new());
        assert_eq!(
            all_splits(b"<html>\n<body>oops</body>\n"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn oversized_events_are_refused() {
        let mut f = SseFramer::new(64);
        let mut out: Vec<String> = Vec::new();
        let mut push = |d: &str| out.push(d.to_string());
        let big = format!("data: {}\n\n", "x".repeat(100));
        assert_eq!(
            f.feed(big.as_bytes(), &mut push),
            Err(EventTooLarge { limit: 64 })
        );
        // A line that never ends is refused too, before it ends.
        let mut f = SseFramer::new(64);
        let mut refused = false;
        for _ in 0..100 {
            if f.feed(b"xx", &mut push).is_err() {
                refused = true;
                break;
            }
        }
        assert!(refused);
        assert!(out.is_empty());
    }

    #[test]
    fn a_big_event_in_small_reads_is_whole() {
        let text = "y".repeat(300_000);
        let body = format!("data: {text}\n\ndata: [DONE]\n\n");
        let got = frame(body.as_bytes(), 1000).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].len(), 300_000);
    }
}
