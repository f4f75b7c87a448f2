//! Text buffers of one command: the UTF-8 decoder of a byte stream, the 1 MiB output ring at
//! absolute byte offsets (oldest text dropped; drained by the PenguinHarness tools with the drop
//! marker of `docs/tools.md#background-commands`, paged by cursor by the OpenVaala tools of
//! `docs/tools-openvaala.md`) and the 4000-char tail used by background completion notices.
//!
//! Pure data structures: no I/O, no actors, no clocks. Text is only ever cut on character
//! boundaries.

/// Capacity of a command's output ring in bytes (1 MiB, `docs/tools.md#background-commands`).
pub const RING_CAP_BYTES: usize = 1_048_576;

/// How many characters of output a completion notice keeps (`docs/tools.md#background-notices`).
pub const TAIL_CHARS: usize = 4000;

/// Decodes a byte stream that may split multi-byte characters across reads. Incomplete
/// trailing bytes are held until the next chunk; invalid bytes become U+FFFD.
#[derive(Debug, Default)]
pub struct Utf8Decoder {
    pending: Vec<u8>,
}

impl Utf8Decoder {
    /// Appends `bytes` and returns every complete character decoded so far.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::with_capacity(self.pending.len());
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    // `good` is valid by construction.
                    out.push_str(std::str::from_utf8(good).unwrap_or_default());
                    match e.error_len() {
                        Some(n) => {
                            out.push('\u{FFFD}');
                            rest = &bad[n..];
                        }
                        None => {
                            // An incomplete character at the end: keep it for the next chunk.
                            rest = bad;
                            break;
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        out
    }

    /// End of stream: whatever incomplete bytes remain become U+FFFD.
    pub fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.pending);
        String::from_utf8_lossy(&rest).into_owned()
    }
}

/// The text of `s` without its first `n` characters.
fn skip_chars(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[i..],
        None => "",
    }
}

/// A command's output: the last [`RING_CAP_BYTES`] bytes of its (decoded, UTF-8) text, kept
/// at absolute byte offsets (offset 0 is the first byte the command ever wrote). Two readers
/// share it without disturbing each other:
///
/// - [`OutputRing::drain`] (PenguinHarness tools) takes everything not drained before, prefixed
///   with `[... N chars of earlier output dropped ...]\n` when undrained text was lost;
/// - [`OutputRing::read_at`] (OpenVaala tools) pages from any cursor without consuming anything;
///   a cursor before the oldest kept byte reads from there and reports how many bytes it missed.
///
/// Text is only ever dropped on character boundaries, so a kept byte range is always valid UTF-8.
#[derive(Debug)]
pub struct OutputRing {
    /// Kept text starts at `text[head..]`; `text[..head]` is dropped, compacted lazily.
    text: String,
    head: usize,
    /// Absolute offset of `text[0]`.
    base: u64,
    cap: usize,
    /// Absolute offset up to which [`Self::drain`] has taken the text.
    drained: u64,
    /// Characters dropped before anyone drained them (reset by the drain that reports them).
    dropped_chars: u64,
}

/// One page read from an [`OutputRing`] at a cursor.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RingPage {
    /// Bytes between the requested cursor and the oldest kept byte (0 when nothing was missed).
    pub dropped: u64,
    /// The page (whole characters only).
    pub text: String,
    /// Absolute offset right after the page: the cursor of the next read.
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
            text: String::new(),
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
        self.base + self.text.len() as u64
    }

    /// True when [`Self::drain`] has nothing to give (neither text nor a drop marker).
    pub fn is_empty(&self) -> bool {
        self.drained >= self.end() && self.dropped_chars == 0
    }

    /// Appends text, dropping the oldest bytes beyond the capacity (on a character boundary).
    pub fn push(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.text.push_str(text);
        let kept = self.text.len() - self.head;
        if kept <= self.cap {
            return;
        }
        let mut cut = self.text.len() - self.cap;
        while !self.text.is_char_boundary(cut) {
            cut += 1;
        }
        // Undrained text that goes now is reported by the next drain.
        let undrained_from = (self.drained.max(self.start()) - self.base) as usize;
        if undrained_from < cut {
            self.dropped_chars += self.text[undrained_from..cut].chars().count() as u64;
        }
        self.head = cut;
        // Compact once the dead prefix is as large as the capacity: amortised O(1) per byte.
        if self.head >= self.cap {
            self.text.drain(..self.head);
            self.base += self.head as u64;
            self.head = 0;
        }
    }

    /// The kept text from absolute offset `from` (clamped into the kept range).
    fn slice_from(&self, from: u64) -> &str {
        let from = from.clamp(self.start(), self.end());
        let mut i = (from - self.base) as usize;
        while !self.text.is_char_boundary(i) {
            i += 1;
        }
        &self.text[i..]
    }

    /// Takes everything not drained yet, prefixed with the drop marker when undrained text was
    /// lost since the last drain (the tally then restarts). Does not affect [`Self::read_at`].
    pub fn drain(&mut self) -> String {
        let mut out = String::new();
        if self.dropped_chars > 0 {
            out.push_str(&format!(
                "[... {} chars of earlier output dropped ...]\n",
                self.dropped_chars
            ));
            self.dropped_chars = 0;
        }
        out.push_str(self.slice_from(self.drained));
        self.drained = self.end();
        out
    }

    /// At most `max` bytes of text from absolute offset `cursor`, never splitting a character.
    /// A cursor before the oldest kept byte reads from it (`dropped` says how many bytes were
    /// missed); one past the end reads nothing at the end; one inside a character starts at
    /// the next character.
    pub fn read_at(&self, cursor: u64, max: usize) -> RingPage {
        let start = self.start();
        let dropped = start.saturating_sub(cursor);
        let rest = self.slice_from(cursor);
        let from = self.end() - rest.len() as u64;
        let mut n = rest.len().min(max);
        while !rest.is_char_boundary(n) {
            n -= 1;
        }
        RingPage {
            dropped,
            text: rest[..n].to_string(),
            next: from + n as u64,
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

    #[test]
    fn decoder_joins_split_characters() {
        let bytes = "aé✓€z".as_bytes();
        let mut d = Utf8Decoder::default();
        let mut out = String::new();
        for b in bytes {
            out.push_str(&d.push(std::slice::from_ref(b)));
        }
        out.push_str(&d.finish());
        assert_eq!(out, "aé✓€z");
    }

    #[test]
    fn decoder_replaces_invalid_and_truncated_bytes() {
        let mut d = Utf8Decoder::default();
        assert_eq!(d.push(b"a\xffb\xe2\x9c"), "a\u{FFFD}b");
        assert_eq!(d.finish(), "\u{FFFD}");
        assert_eq!(d.push(b"ok"), "ok");
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
