//! The bounded window scan behind read_file: reads a file in chunks up to a hard scan cap,
//! splits lines on byte `\n`, hands the lines inside the requested window to a sink (each
//! retained up to [`LINE_BYTE_CAP`] bytes) and counts the rest, noting NUL bytes and CRLF. A
//! line still open at the cap is never handed over: like PenguinHarness, read_file then
//! answers with the scan-cap guidance when no window line came before it.
//!
//! It never loads a whole file and never renders output: numbering, budgets and texts belong
//! to `read_file`.

use std::borrow::Cow;
use std::io::{self, Read};

/// Bytes read per read call.
pub(super) const CHUNK_BYTES: usize = 256 * 1024;
/// The first read buffer (it grows towards `CHUNK_BYTES` while reads fill it).
const INITIAL_BUF_BYTES: usize = 8 * 1024;

/// Hard cap on bytes scanned per call.
pub(super) const SCAN_CAP_BYTES: u64 = 8 * 1024 * 1024;

/// Bytes kept of one line: at most 4 bytes per character, so a cut line still decodes to at
/// least 2000 characters.
pub(super) const LINE_BYTE_CAP: usize = 8000;

/// What the scan found.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct ScanOutcome {
    /// Lines in the file (exact when `total_known`, else those seen before the cap).
    pub total: u64,
    /// The whole file was scanned.
    pub total_known: bool,
    /// A `\r\n` was seen in the scanned range.
    pub saw_crlf: bool,
    /// A NUL byte was seen; the scan stopped there.
    pub binary: bool,
}

/// The bounds of one scan.
#[derive(Debug, Clone, Copy)]
pub(super) struct ScanLimits {
    pub chunk: usize,
    pub cap: u64,
    /// The size of a regular file (`fstat`): a read that does not fill the buffer and brings
    /// the bytes scanned to at least this many is taken as the end (no extra `read` that
    /// returns 0). `None`: read until a `read` returns 0.
    pub end_at: Option<u64>,
}

impl Default for ScanLimits {
    fn default() -> Self {
        ScanLimits {
            chunk: CHUNK_BYTES,
            cap: SCAN_CAP_BYTES,
            end_at: None,
        }
    }
}

/// Scans `reader`, calling `on_line(line_no, bytes, cut)` for every line numbered within
/// `first..=last` in order (`cut`: the line had more bytes than were kept). Once `on_line`
/// returns `false` no more lines are handed over, but counting goes on to EOF or the cap.
pub(super) fn scan<R: Read>(
    reader: &mut R,
    first: u64,
    last: u64,
    limits: ScanLimits,
    on_line: &mut dyn FnMut(u64, &[u8], bool) -> bool,
) -> io::Result<ScanOutcome> {
    let mut state = LineState {
        first,
        last,
        completed: 0,
        has_bytes: false,
        current: Vec::new(),
        cut: false,
        wanting: true,
    };
    let mut out = ScanOutcome::default();
    // Starts small and doubles while reads fill it (up to `limits.chunk`): a small file costs a
    // small buffer, not a fresh zeroed chunk mapping. A file of a known size smaller than that
    // gets one byte more than its size, so its one read ends short at the size.
    let chunk = limits.chunk.max(1);
    let first_buf = match limits.end_at.and_then(|size| usize::try_from(size).ok()) {
        Some(size) => size.saturating_add(1).min(INITIAL_BUF_BYTES),
        None => INITIAL_BUF_BYTES,
    };
    let mut buf = vec![0u8; chunk.min(first_buf)];
    let mut scanned: u64 = 0;
    let mut prev_byte: Option<u8> = None;
    loop {
        let room = limits.cap.saturating_sub(scanned);
        if room == 0 {
            // At the cap: a file that ends exactly here still gets its exact total.
            if read_some(reader, &mut buf[..1])? == 0 {
                state.finish_at_eof(on_line);
                out.total = state.completed;
                out.total_known = true;
            } else {
                // A line the cap cut short is counted, never shown.
                out.total = state.completed + u64::from(state.has_bytes);
            }
            return Ok(out);
        }
        let want = usize::try_from(room).map_or(buf.len(), |r| r.min(buf.len()));
        let n = read_some(reader, &mut buf[..want])?;
        if n == 0 {
            state.finish_at_eof(on_line);
            out.total = state.completed;
            out.total_known = true;
            return Ok(out);
        }
        let filled = n == buf.len();
        let data = &buf[..n];
        if data.contains(&0) {
            out.binary = true;
            return Ok(out);
        }
        scanned += n as u64;
        let mut from = 0;
        for i in memchr::memchr_iter(b'\n', data) {
            let before = if i > 0 { Some(data[i - 1]) } else { prev_byte };
            if before == Some(b'\r') {
                out.saw_crlf = true;
            }
            state.complete(&data[from..i], on_line);
            from = i + 1;
        }
        state.append(&data[from..]);
        prev_byte = data.last().copied();
        if n < want && limits.end_at.is_some_and(|size| scanned >= size) {
            // A short read of a regular file at its size: its end, as the next read would say.
            state.finish_at_eof(on_line);
            out.total = state.completed;
            out.total_known = true;
            return Ok(out);
        }
        if filled && buf.len() < chunk {
            let grown = (buf.len() * 2).min(chunk);
            buf.resize(grown, 0);
        }
    }
}

/// The line in progress and the count of finished lines.
struct LineState {
    first: u64,
    last: u64,
    completed: u64,
    has_bytes: bool,
    current: Vec<u8>,
    cut: bool,
    wanting: bool,
}

impl LineState {
    fn in_window(&self) -> bool {
        let line_no = self.completed + 1;
        self.wanting && line_no >= self.first && line_no <= self.last
    }

    fn append(&mut self, run: &[u8]) {
        if run.is_empty() {
            return;
        }
        self.has_bytes = true;
        if !self.in_window() {
            return;
        }
        let room = LINE_BYTE_CAP.saturating_sub(self.current.len());
        if run.len() > room {
            self.cut = true;
        }
        self.current.extend_from_slice(&run[..run.len().min(room)]);
    }

    /// Ends the line in progress with `run`, its last bytes: a line that lies whole in one
    /// read is handed over from the read buffer, without a copy.
    fn complete(&mut self, run: &[u8], on_line: &mut dyn FnMut(u64, &[u8], bool) -> bool) {
        if self.current.is_empty() && self.in_window() {
            let kept = run.len().min(LINE_BYTE_CAP);
            self.wanting = on_line(self.completed + 1, &run[..kept], kept < run.len());
            self.completed += 1;
            self.has_bytes = false;
            return;
        }
        self.append(run);
        self.finish_line(on_line);
    }

    fn finish_line(&mut self, on_line: &mut dyn FnMut(u64, &[u8], bool) -> bool) {
        if self.in_window() {
            self.wanting = on_line(self.completed + 1, &self.current, self.cut);
        }
        self.completed += 1;
        self.current.clear();
        self.cut = false;
        self.has_bytes = false;
    }

    /// A final line without a trailing newline still counts.
    fn finish_at_eof(&mut self, on_line: &mut dyn FnMut(u64, &[u8], bool) -> bool) {
        if self.has_bytes {
            self.finish_line(on_line);
        }
    }
}

/// One `read` call, retried on `Interrupted`.
fn read_some<R: Read>(reader: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match reader.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// The text of a kept line: a cut line loses its trailing incomplete UTF-8 sequence (never half
/// a character), an uncut line its trailing `\r`; invalid UTF-8 becomes U+FFFD. Valid text is
/// borrowed, not copied.
pub(super) fn decode_line(bytes: &[u8], cut: bool) -> Cow<'_, str> {
    let bytes = if cut {
        &bytes[..bytes.len() - partial_char_len(bytes)]
    } else {
        bytes.strip_suffix(b"\r").unwrap_or(bytes)
    };
    // The strict check is several times faster on valid text (ASCII a word at a time) than
    // the lossy decoder, which then only runs on a line that needs it.
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// The length of the multi-byte sequence that the byte cap cut short at the end of `bytes`
/// (0 when the last character is whole).
fn partial_char_len(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=len.min(4) {
        let byte = bytes[len - back];
        if byte & 0xC0 == 0x80 {
            continue; // continuation byte: keep looking for the lead byte
        }
        let needed = match byte {
            0xF0..=0xFF => 4,
            0xE0..=0xEF => 3,
            0xC0..=0xDF => 2,
            _ => 1,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    type Lines = Vec<(u64, Vec<u8>, bool)>;

    fn run(data: &[u8], first: u64, last: u64, limits: ScanLimits) -> (ScanOutcome, Lines) {
        let mut lines = Vec::new();
        let out = scan(
            &mut Cursor::new(data.to_vec()),
            first,
            last,
            limits,
            &mut |n, b, cut| {
                lines.push((n, b.to_vec(), cut));
                true
            },
        )
        .unwrap();
        (out, lines)
    }

    fn small(chunk: usize, cap: u64) -> ScanLimits {
        ScanLimits {
            chunk,
            cap,
            end_at: None,
        }
    }

    /// A reader that counts its `read` calls.
    struct Counted {
        inner: Cursor<Vec<u8>>,
        reads: usize,
    }

    impl Read for Counted {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.reads += 1;
            self.inner.read(buf)
        }
    }

    fn reads_with(data: &[u8], end_at: Option<u64>) -> (usize, ScanOutcome) {
        let mut r = Counted {
            inner: Cursor::new(data.to_vec()),
            reads: 0,
        };
        let limits = ScanLimits {
            end_at,
            ..ScanLimits::default()
        };
        let out = scan(&mut r, 1, 10, limits, &mut |_, _, _| true).unwrap();
        (r.reads, out)
    }

    #[test]
    fn a_short_read_at_the_known_size_is_the_end() {
        let data = b"one\ntwo\nthree";
        let (reads, out) = reads_with(data, Some(data.len() as u64));
        assert_eq!(reads, 1);
        assert_eq!((out.total, out.total_known), (3, true));
        // Unknown size, or a size the content does not reach (sysfs reports a page): read to
        // the read that returns 0.
        assert_eq!(reads_with(data, None), (2, out.clone()));
        assert_eq!(reads_with(data, Some(4096)), (2, out));
        // A file that grew past its size is read to its end too: the buffer sized for 4 bytes
        // comes back full, so the scan reads on (into a doubled buffer).
        let (reads, grown) = reads_with(data, Some(4));
        assert_eq!((reads, grown.total, grown.total_known), (2, 3, true));
        let (reads, empty) = reads_with(b"", Some(1));
        assert_eq!((reads, empty.total, empty.total_known), (1, 0, true));
    }

    #[test]
    fn counts_lines_and_final_line_without_newline() {
        let (out, lines) = run(b"a\n\nb\nc", 2, 3, ScanLimits::default());
        assert_eq!(
            out,
            ScanOutcome {
                total: 4,
                total_known: true,
                ..ScanOutcome::default()
            }
        );
        assert_eq!(lines, vec![(2, vec![], false), (3, b"b".to_vec(), false)]);
    }

    #[test]
    fn crlf_detected_across_chunk_boundary() {
        // chunk 2: "a\r" | "\nb"
        let (out, lines) = run(b"a\r\nb", 1, 10, small(2, 1 << 20));
        assert!(out.saw_crlf);
        assert_eq!(out.total, 2);
        assert_eq!(decode_line(&lines[0].1, lines[0].2), "a");
        let (lone_cr, _) = run(b"a\rb\n", 1, 10, small(2, 1 << 20));
        assert!(!lone_cr.saw_crlf);
    }

    #[test]
    fn nul_anywhere_in_scanned_range_is_binary() {
        let mut data = b"line\n".repeat(10);
        data.extend_from_slice(b"x\0y");
        let (out, _) = run(&data, 1, 1, small(4, 1 << 20));
        assert!(out.binary);
    }

    #[test]
    fn cap_stops_counting_and_exact_cap_file_is_known() {
        let data = b"ab\n".repeat(4); // 12 bytes
        let (out, lines) = run(&data, 1, 2, small(5, 7));
        assert_eq!((out.total, out.total_known), (3, false)); // "ab\nab\na" → 2 + partial
        assert_eq!(lines.len(), 2);
        let (out, _) = run(&data, 1, 2, small(5, 12));
        assert_eq!((out.total, out.total_known), (4, true));
    }

    #[test]
    fn a_window_line_open_at_the_cap_is_counted_but_not_handed_over() {
        let mut data = b"short\n".to_vec();
        data.extend_from_slice(&[b'x'; 100]);
        let (out, lines) = run(&data, 2, 3, small(16, 50));
        assert_eq!((out.total, out.total_known), (2, false));
        assert!(lines.is_empty(), "{lines:?}");
        // The window's lines before it are handed over.
        let (out, lines) = run(&data, 1, 3, small(16, 50));
        assert_eq!((out.total, out.total_known), (2, false));
        assert_eq!(lines, vec![(1, b"short".to_vec(), false)]);
    }

    #[test]
    fn sink_refusal_stops_handing_lines_but_not_counting() {
        let mut seen = Vec::new();
        let out = scan(
            &mut Cursor::new(b"1\n2\n3\n4\n".to_vec()),
            1,
            10,
            ScanLimits::default(),
            &mut |n, _, _| {
                seen.push(n);
                n < 2
            },
        )
        .unwrap();
        assert_eq!(seen, vec![1, 2]);
        assert_eq!((out.total, out.total_known), (4, true));
    }

    #[test]
    fn long_line_kept_to_byte_cap_and_marked_cut() {
        let mut data = vec![b'x'; LINE_BYTE_CAP + 10];
        data.push(b'\n');
        data.extend_from_slice(&vec![b'y'; LINE_BYTE_CAP]);
        let (_, lines) = run(&data, 1, 2, small(3000, 1 << 20));
        assert_eq!((lines[0].1.len(), lines[0].2), (LINE_BYTE_CAP, true));
        assert_eq!((lines[1].1.len(), lines[1].2), (LINE_BYTE_CAP, false));
    }

    /// Lines that lie whole in one read are handed over from the buffer; the cap and the cut
    /// mark are the same as for lines assembled across reads.
    #[test]
    fn a_long_line_within_one_read_is_cut_like_one_across_reads() {
        let mut data = vec![b'x'; LINE_BYTE_CAP + 10];
        data.extend_from_slice(b"\nshort\r\n\nlast");
        let whole = run(&data, 1, 4, ScanLimits::default());
        let pieces = run(&data, 1, 4, small(7, 1 << 20));
        assert_eq!(whole, pieces);
        let (out, lines) = whole;
        assert_eq!((out.total, out.saw_crlf), (4, true));
        assert_eq!((lines[0].1.len(), lines[0].2), (LINE_BYTE_CAP, true));
        assert_eq!(
            lines[1..],
            [
                (2, b"short\r".to_vec(), false),
                (3, vec![], false),
                (4, b"last".to_vec(), false)
            ]
        );
    }

    #[test]
    fn decode_never_splits_a_character() {
        let mut bytes = "a".as_bytes().to_vec();
        bytes.extend_from_slice(&"😀".as_bytes()[..3]);
        assert_eq!(decode_line(&bytes, true), "a");
        // Uncut: invalid bytes are replaced, trailing \r stripped.
        assert_eq!(decode_line(b"a\xffb\r", false), "a\u{FFFD}b");
        assert_eq!(decode_line("é😀".as_bytes(), true), "é😀");
    }
}
