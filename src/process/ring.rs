//! Byte buffers of one command: the splitter that cuts a byte stream on character boundaries,
//! the 1 MiB output ring at absolute byte offsets (the bytes the command wrote; oldest bytes
//! dropped; drained by the PenguinHarness tools with the drop marker of
//! `docs/tools.md#background-commands`, paged by cursor by the OpenVaala tools of
//! `docs/tools-openvaala.md`) and the 4000-char tail used by background completion notices.
//!
//! Pure data structures: no I/O, no actors, no clocks. The ring keeps the command's own bytes,
//! so every offset counts what the command wrote; text is decoded only when it is read (invalid
//! bytes become U+FFFD, one per invalid sequence) and is only ever cut on character boundaries.

/// Capacity of a command's output ring in bytes (1 MiB, `docs/tools.md#background-commands`).
pub const RING_CAP_BYTES: usize = 1_048_576;

/// How many characters of output a completion notice keeps (`docs/tools.md#background-notices`).
pub const TAIL_CHARS: usize = 4000;

/// Cuts a byte stream that may split multi-byte characters across reads into chunks that end
/// on a character boundary: an incomplete character at the end of a read is held until the next
/// one. Each chunk then decodes on its own exactly as it would inside the whole stream.
#[derive(Debug, Default)]
pub struct Utf8Splitter {
    pending: Vec<u8>,
}

impl Utf8Splitter {
    /// Appends `bytes` and returns every byte up to the last complete character (or invalid
    /// sequence) so far.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut all = std::mem::take(&mut self.pending);
        all.extend_from_slice(bytes);
        let held = incomplete_tail(&all);
        self.pending = all.split_off(all.len() - held);
        all
    }

    /// End of stream: whatever incomplete bytes remain (they decode as one U+FFFD).
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.pending)
    }
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// How many bytes at the end of `b` are the start of a character that is not complete yet.
fn incomplete_tail(b: &[u8]) -> usize {
    let n = b.len();
    for back in 1..=n.min(3) {
        let i = n - back;
        if !is_continuation(b[i]) {
            return match std::str::from_utf8(&b[i..]) {
                Err(e) if e.valid_up_to() == 0 && e.error_len().is_none() => back,
                _ => 0,
            };
        }
    }
    0
}

/// The length of the valid character starting `b` (`None`: `b` starts no valid character).
fn char_len(b: &[u8]) -> Option<usize> {
    let want = match b.first()? {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => return None,
    };
    let head = b.get(..want)?;
    std::str::from_utf8(head).ok().map(|_| want)
}

/// The first offset at or after `i` that is not inside a valid multi-byte character of `b`
/// (looking back at most 3 bytes, never before `floor`).
fn boundary_at_or_after(b: &[u8], floor: usize, i: usize) -> usize {
    for back in 1..=3 {
        let Some(j) = i.checked_sub(back).filter(|j| *j >= floor) else {
            break;
        };
        if !is_continuation(b[j]) {
            if let Some(len) = char_len(&b[j..])
                && j + len > i
            {
                return j + len;
            }
            break;
        }
    }
    i
}

/// The text of `bytes`, invalid sequences as U+FFFD (each stored chunk starts and ends on a
/// boundary, so this is what the whole stream decodes to there).
fn decode(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The decoded text of a prefix of `bytes` that is at most `max` bytes long once decoded, and
/// how many of `bytes` it took. Never splits a character or an invalid sequence.
fn decode_at_most(bytes: &[u8], max: usize) -> (String, usize) {
    let mut text = String::new();
    let mut taken = 0;
    for chunk in bytes.utf8_chunks() {
        let valid = chunk.valid();
        let room = max - text.len();
        if valid.len() > room {
            let mut n = room;
            while !valid.is_char_boundary(n) {
                n -= 1;
            }
            text.push_str(&valid[..n]);
            taken += n;
            return (text, taken);
        }
        text.push_str(valid);
        taken += valid.len();
        let invalid = chunk.invalid();
        if !invalid.is_empty() {
            if max - text.len() < char::REPLACEMENT_CHARACTER.len_utf8() {
                return (text, taken);
            }
            text.push(char::REPLACEMENT_CHARACTER);
            taken += invalid.len();
        }
    }
    (text, taken)
}

/// The text of `s` without its first `n` characters.
fn skip_chars(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[i..],
        None => "",
    }
}

/// A command's output: the last [`RING_CAP_BYTES`] bytes it wrote, kept at absolute byte
/// offsets (offset 0 is the first byte the command ever wrote; invalid UTF-8 counts as the
/// bytes it is). Two readers share it without disturbing each other:
///
/// - [`OutputRing::drain`] (PenguinHarness tools) takes everything not drained before, prefixed
///   with `[... N chars of earlier output dropped ...]\n` when undrained text was lost;
/// - [`OutputRing::read_at`] (OpenVaala tools) pages from any cursor without consuming anything;
///   a cursor before the oldest kept byte reads from there and reports how many bytes it missed.
///
/// Bytes are pushed in chunks that end on character boundaries ([`Utf8Splitter`]) and only ever
/// dropped on one, so the kept bytes decode as they did in the whole stream.
#[derive(Debug)]
pub struct OutputRing {
    /// Kept bytes start at `bytes[head..]`; `bytes[..head]` is dropped, compacted lazily.
    bytes: Vec<u8>,
    head: usize,
    /// Absolute offset of `bytes[0]`.
    base: u64,
    cap: usize,
    /// Absolute offset up to which [`Self::drain`] has taken the output.
    drained: u64,
    /// Characters dropped before anyone drained them (reset by the drain that reports them).
    dropped_chars: u64,
}

/// One page read from an [`OutputRing`] at a cursor.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RingPage {
    /// Bytes between the requested cursor and the oldest kept byte (0 when nothing was missed).
    pub dropped: u64,
    /// The page, decoded (whole characters only).
    pub text: String,
    /// Absolute offset right after the page's bytes: the cursor of the next read.
    pub next: u64,
}

impl Default for OutputRing {
    fn default() -> Self {
        Self::with_capacity(RING_CAP_BYTES)
    }
}

impl OutputRing {
    /// A ring keeping at most `cap` bytes (at least 4, one character of any width).
    pub fn with_capacity(cap: usize) -> Self {
        OutputRing {
            bytes: Vec::new(),
            head: 0,
            base: 0,
            cap: cap.max(4),
            drained: 0,
            dropped_chars: 0,
        }
    }

    /// Absolute offset of the oldest kept byte.
    pub fn start(&self) -> u64 {
        self.base + self.head as u64
    }

    /// Absolute offset right after the newest byte (every byte ever written).
    pub fn end(&self) -> u64 {
        self.base + self.bytes.len() as u64
    }

    /// True when [`Self::drain`] has nothing to give (neither output nor a drop marker).
    pub fn is_empty(&self) -> bool {
        self.drained >= self.end() && self.dropped_chars == 0
    }

    /// Appends a chunk of the command's bytes that ends on a character boundary (as
    /// [`Utf8Splitter`] cuts them), dropping the oldest bytes beyond the capacity (on a
    /// character boundary).
    pub fn push(&mut self, chunk: impl AsRef<[u8]>) {
        let chunk = chunk.as_ref();
        if chunk.is_empty() {
            return;
        }
        self.bytes.extend_from_slice(chunk);
        let kept = self.bytes.len() - self.head;
        if kept <= self.cap {
            return;
        }
        let cut = self.bytes.len() - self.cap;
        let cut = boundary_at_or_after(&self.bytes, self.head, cut);
        // Undrained output that goes now is reported by the next drain.
        let undrained_from = (self.drained.max(self.start()) - self.base) as usize;
        if undrained_from < cut {
            let lost = String::from_utf8_lossy(&self.bytes[undrained_from..cut]);
            self.dropped_chars += lost.chars().count() as u64;
        }
        self.head = cut;
        // Compact once the dead prefix is as large as the capacity: amortised O(1) per byte.
        if self.head >= self.cap {
            self.bytes.drain(..self.head);
            self.base += self.head as u64;
            self.head = 0;
        }
    }

    /// The kept bytes from absolute offset `from` (clamped into the kept range, moved past a
    /// character it falls inside).
    fn slice_from(&self, from: u64) -> &[u8] {
        let from = from.clamp(self.start(), self.end());
        let i = (from - self.base) as usize;
        &self.bytes[boundary_at_or_after(&self.bytes, self.head, i)..]
    }

    /// Takes everything not drained yet, decoded, prefixed with the drop marker when undrained
    /// output was lost since the last drain (the tally then restarts). Does not affect
    /// [`Self::read_at`].
    pub fn drain(&mut self) -> String {
        let mut out = String::new();
        if self.dropped_chars > 0 {
            out.push_str(&format!(
                "[... {} chars of earlier output dropped ...]\n",
                self.dropped_chars
            ));
            self.dropped_chars = 0;
        }
        out.push_str(&decode(self.slice_from(self.drained)));
        self.drained = self.end();
        out
    }

    /// The output from absolute offset `cursor`, decoded, at most `max` bytes of text, never
    /// splitting a character. A cursor before the oldest kept byte reads from it (`dropped`
    /// says how many bytes were missed); one past the end reads nothing at the end; one inside
    /// a character starts at the next character. `next` counts the command's bytes: an invalid
    /// byte shown as U+FFFD (3 bytes of text) moves it by one.
    pub fn read_at(&self, cursor: u64, max: usize) -> RingPage {
        let start = self.start();
        let dropped = start.saturating_sub(cursor);
        let rest = self.slice_from(cursor);
        let from = self.end() - rest.len() as u64;
        let (text, taken) = decode_at_most(rest, max);
        RingPage {
            dropped,
            text,
            next: from + taken as u64,
        }
    }
}

/// The last [`TAIL_CHARS`] characters of everything a command wrote (independent of reads).
#[derive(Debug, Default)]
pub struct TailBuffer {
    text: String,
    chars: usize,
    cut: bool,
}

impl TailBuffer {
    /// Appends `text`, dropping the oldest characters past the limit.
    pub fn push(&mut self, text: &str) {
        self.text.push_str(text);
        self.chars += text.chars().count();
        // Trim lazily (at twice the size) so pushes stay amortised O(len).
        if self.chars > 2 * TAIL_CHARS {
            self.text = skip_chars(&self.text, self.chars - TAIL_CHARS).to_string();
            self.chars = TAIL_CHARS;
            self.cut = true;
        }
    }

    /// The tail as a completion notice shows it: the last 4000 characters, prefixed with
    /// `[earlier output dropped: exceeded 4000 chars]\n` when the output was longer.
    pub fn render(&self) -> String {
        if self.chars > TAIL_CHARS {
            format!(
                "[earlier output dropped: exceeded {TAIL_CHARS} chars]\n{}",
                skip_chars(&self.text, self.chars - TAIL_CHARS)
            )
        } else if self.cut {
            format!(
                "[earlier output dropped: exceeded {TAIL_CHARS} chars]\n{}",
                self.text
            )
        } else {
            self.text.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a stream cut by the splitter decodes to, chunk by chunk.
    fn split_and_decode(bytes: &[u8], step: usize) -> (String, usize) {
        let mut d = Utf8Splitter::default();
        let (mut out, mut total) = (String::new(), 0);
        for piece in bytes.chunks(step) {
            let chunk = d.push(piece);
            total += chunk.len();
            out.push_str(&decode(&chunk));
        }
        let rest = d.finish();
        total += rest.len();
        out.push_str(&decode(&rest));
        (out, total)
    }

    #[test]
    fn splitter_joins_split_characters() {
        for step in 1..5 {
            assert_eq!(
                split_and_decode("aé✓€z😀".as_bytes(), step),
                ("aé✓€z😀".to_string(), 14)
            );
        }
    }

    #[test]
    fn splitter_keeps_invalid_and_truncated_bytes_as_they_are() {
        let mut d = Utf8Splitter::default();
        assert_eq!(d.push(b"a\xffb\xe2\x9c"), b"a\xffb");
        assert_eq!(d.finish(), b"\xe2\x9c");
        assert_eq!(d.push(b"ok"), b"ok");
        let bytes = b"x\xff\xfe\xe2\x9cA\xf0\x9f\x98y\xc3";
        for step in 1..6 {
            assert_eq!(
                split_and_decode(bytes, step),
                (String::from_utf8_lossy(bytes).into_owned(), bytes.len()),
                "{step}"
            );
        }
    }

    #[test]
    fn offsets_count_the_bytes_written_not_the_decoded_text() {
        let mut r = OutputRing::with_capacity(100);
        // 7 bytes, three invalid sequences (4 bytes) among them: 11 bytes of text.
        r.push(b"a\xffb\xfe\xe2\x9cc" as &[u8]);
        r.push("é".as_bytes());
        assert_eq!(r.end(), 9);
        let all = "a\u{FFFD}b\u{FFFD}\u{FFFD}cé";
        let p = r.read_at(0, 100);
        assert_eq!((p.text.as_str(), p.next), (all, 9));
        // A page that has room for "a" and one U+FFFD ends after the byte it replaced.
        let p = r.read_at(0, 4);
        assert_eq!((p.text.as_str(), p.next), ("a\u{FFFD}", 2));
        let p = r.read_at(p.next, 100);
        assert_eq!((p.text.as_str(), p.next), ("b\u{FFFD}\u{FFFD}cé", 9));
        // Not even one U+FFFD fits: an empty page at the same cursor.
        let p = r.read_at(1, 2);
        assert_eq!((p.text.as_str(), p.next), ("", 1));
        assert_eq!(r.drain(), all);
    }

    #[test]
    fn drops_of_invalid_bytes_count_bytes_and_characters() {
        let mut r = OutputRing::with_capacity(4);
        r.push(b"\xff\xff\xff" as &[u8]);
        r.push(b"ab\xff" as &[u8]);
        assert_eq!((r.start(), r.end()), (2, 6));
        let p = r.read_at(0, 100);
        assert_eq!(
            (p.dropped, p.text.as_str(), p.next),
            (2, "\u{FFFD}ab\u{FFFD}", 6)
        );
        assert_eq!(
            r.drain(),
            "[... 2 chars of earlier output dropped ...]\n\u{FFFD}ab\u{FFFD}"
        );
    }

    #[test]
    fn ring_keeps_newest_and_marks_drops() {
        let mut r = OutputRing::with_capacity(10);
        r.push("abcdef");
        r.push("ghijkl");
        assert_eq!(
            r.drain(),
            "[... 2 chars of earlier output dropped ...]\ncdefghijkl"
        );
        assert!(r.is_empty());
        assert_eq!(r.drain(), "");
        r.push("äöü");
        assert_eq!(r.drain(), "äöü");
    }

    #[test]
    fn drain_counts_only_undrained_characters_as_dropped() {
        let mut r = OutputRing::with_capacity(8);
        r.push("abcd");
        assert_eq!(r.drain(), "abcd");
        // 12 bytes into 8: "abcd" (drained) goes, nothing undrained is lost.
        r.push("efghijkl");
        assert_eq!(r.drain(), "efghijkl");
        // "mnop" pushes out "efgh", which was drained too.
        r.push("mnop");
        assert_eq!(r.drain(), "mnop");
        r.push("0123456789");
        assert_eq!(
            r.drain(),
            "[... 2 chars of earlier output dropped ...]\n23456789"
        );
    }

    #[test]
    fn ring_cuts_multibyte_text_on_char_boundaries() {
        // Capacity in bytes: "✓" is 3 bytes, "é" 2.
        let mut r = OutputRing::with_capacity(8);
        r.push("✓✓✓");
        // 9 bytes into 8: the first ✓ must go whole.
        assert_eq!(r.start(), 3);
        assert_eq!(r.end(), 9);
        r.push("éé");
        // 10 kept bytes > 8: the cut at byte 5 moves to the next boundary, dropping one ✓ more.
        assert_eq!(r.start(), 6);
        assert_eq!(
            r.drain(),
            "[... 2 chars of earlier output dropped ...]\n✓éé"
        );
        r.push("0123456789");
        assert_eq!(r.start(), 23 - 8);
        assert_eq!(
            r.drain(),
            "[... 2 chars of earlier output dropped ...]\n23456789"
        );
    }

    #[test]
    fn ring_one_mib_exact_marker() {
        let mut r = OutputRing::default();
        let line = "x".repeat(1000);
        for _ in 0..1200 {
            r.push(&line);
        }
        let text = r.drain();
        let marker = "[... 151424 chars of earlier output dropped ...]\n";
        assert!(text.starts_with(marker));
        assert_eq!(text.len() - marker.len(), RING_CAP_BYTES);
        assert_eq!(r.start(), 1_200_000 - RING_CAP_BYTES as u64);
        assert_eq!(r.end(), 1_200_000);
    }

    #[test]
    fn cursors_page_through_absolute_offsets() {
        let mut r = OutputRing::with_capacity(100);
        r.push("hello ");
        r.push("world");
        let p = r.read_at(0, 4);
        assert_eq!((p.dropped, p.text.as_str(), p.next), (0, "hell", 4));
        let p = r.read_at(p.next, 100);
        assert_eq!((p.dropped, p.text.as_str(), p.next), (0, "o world", 11));
        // At the end: nothing, same cursor; past the end: clamped to the end.
        assert_eq!(r.read_at(11, 10).text, "");
        assert_eq!(r.read_at(11, 10).next, 11);
        assert_eq!(r.read_at(500, 10).next, 11);
        // Reading by cursor consumes nothing: the drain still sees everything.
        assert_eq!(r.drain(), "hello world");
        assert_eq!(r.read_at(6, 100).text, "world");
    }

    #[test]
    fn cursor_before_the_oldest_byte_reports_the_drop() {
        let mut r = OutputRing::with_capacity(10);
        for chunk in ["0123456789", "abcdefghij", "KLMNO"] {
            r.push(chunk);
        }
        assert_eq!(r.start(), 15);
        let p = r.read_at(0, 4);
        assert_eq!((p.dropped, p.text.as_str(), p.next), (15, "fghi", 19));
        let p = r.read_at(12, 100);
        assert_eq!((p.dropped, p.text.as_str(), p.next), (3, "fghijKLMNO", 25));
        let p = r.read_at(19, 100);
        assert_eq!((p.dropped, p.text.as_str()), (0, "jKLMNO"));
    }

    #[test]
    fn pages_never_split_a_character() {
        let mut r = OutputRing::with_capacity(1000);
        r.push("a€b"); // a=0, €=1..4, b=4
        let p = r.read_at(0, 2);
        assert_eq!((p.text.as_str(), p.next), ("a", 1));
        let p = r.read_at(1, 2);
        // Not even one whole character fits: an empty page at the same cursor.
        assert_eq!((p.text.as_str(), p.next), ("", 1));
        let p = r.read_at(1, 3);
        assert_eq!((p.text.as_str(), p.next), ("€", 4));
        // A cursor inside a character starts at the next one.
        let p = r.read_at(2, 10);
        assert_eq!((p.text.as_str(), p.next), ("b", 5));
    }

    #[test]
    fn compaction_keeps_offsets() {
        let mut r = OutputRing::with_capacity(16);
        let mut total = 0u64;
        for i in 0..100 {
            let chunk = format!("{i:03}é");
            total += chunk.len() as u64;
            r.push(&chunk);
            assert_eq!(r.end(), total);
            assert!(r.end() - r.start() <= 16);
        }
        let p = r.read_at(r.start(), 100);
        assert!(p.text.ends_with("099é"), "{}", p.text);
        assert_eq!(p.next, total);
    }

    #[test]
    fn tail_keeps_last_4000_with_marker() {
        let mut t = TailBuffer::default();
        t.push("short");
        assert_eq!(t.render(), "short");
        let mut t = TailBuffer::default();
        for i in 0..5000 {
            t.push(&format!("{}", i % 10));
        }
        let r = t.render();
        let marker = "[earlier output dropped: exceeded 4000 chars]\n";
        assert!(r.starts_with(marker));
        assert_eq!(r.len() - marker.len(), 4000);
        assert!(r.ends_with("56789"));
        let mut t = TailBuffer::default();
        t.push(&"é".repeat(4000));
        assert_eq!(t.render(), "é".repeat(4000));
        t.push("z");
        assert!(t.render().starts_with(marker));
        assert!(t.render().ends_with("éz"));
    }
}
