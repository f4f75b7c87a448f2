//! Text buffers of one command: the UTF-8 decoder of a byte stream, the 1 MiB unread-output ring
//! (oldest text dropped, with the drop marker of `docs/tools.md#background-commands` on the next read) and the 4000-char
//! tail used by background completion notices.
//!
//! Pure data structures: no I/O, no actors, no clocks. Lengths are counted in `char`s and text is
//! only ever cut on character boundaries.

use std::collections::VecDeque;

/// Capacity of the unread-output ring in characters (1 MiB, `docs/tools.md#background-commands`).
pub const RING_CAP_CHARS: usize = 1_048_576;

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

/// Unread output, capped in characters; overflow drops the oldest text and is reported by the
/// next [`OutputRing::drain`] as `[... N chars of earlier output dropped ...]\n`.
#[derive(Debug)]
pub struct OutputRing {
    chunks: VecDeque<(String, usize)>,
    chars: usize,
    cap: usize,
    dropped: u64,
}

impl Default for OutputRing {
    fn default() -> Self {
        Self::with_capacity(RING_CAP_CHARS)
    }
}

impl OutputRing {
    /// A ring holding at most `cap` characters (at least 1).
    pub fn with_capacity(cap: usize) -> Self {
        OutputRing {
            chunks: VecDeque::new(),
            chars: 0,
            cap: cap.max(1),
            dropped: 0,
        }
    }

    /// True when there is nothing to read (neither text nor a drop marker).
    pub fn is_empty(&self) -> bool {
        self.chars == 0 && self.dropped == 0
    }

    /// Appends text, dropping the oldest characters beyond the capacity.
    pub fn push(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let n = text.chars().count();
        if n >= self.cap {
            // The new text alone fills the ring: keep only its newest `cap` characters.
            self.dropped += (self.chars + n - self.cap) as u64;
            self.chunks.clear();
            self.chunks
                .push_back((skip_chars(text, n - self.cap).to_string(), self.cap));
            self.chars = self.cap;
            return;
        }
        self.chunks.push_back((text.to_string(), n));
        self.chars += n;
        let mut excess = self.chars.saturating_sub(self.cap);
        while excess > 0 {
            let Some((front, front_chars)) = self.chunks.front_mut() else {
                break;
            };
            if *front_chars <= excess {
                excess -= *front_chars;
                self.chars -= *front_chars;
                self.dropped += *front_chars as u64;
                self.chunks.pop_front();
            } else {
                *front = skip_chars(front, excess).to_string();
                *front_chars -= excess;
                self.chars -= excess;
                self.dropped += excess as u64;
                excess = 0;
            }
        }
    }

    /// Takes everything unread, prefixed with the drop marker when text was lost since the last
    /// drain (the tally then restarts).
    pub fn drain(&mut self) -> String {
        let mut out = String::new();
        if self.dropped > 0 {
            out.push_str(&format!(
                "[... {} chars of earlier output dropped ...]\n",
                self.dropped
            ));
            self.dropped = 0;
        }
        for (chunk, _) in self.chunks.drain(..) {
            out.push_str(&chunk);
        }
        self.chars = 0;
        out
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
    fn ring_cuts_multibyte_text_on_char_boundaries() {
        let mut r = OutputRing::with_capacity(4);
        r.push("✓✓✓");
        r.push("éé");
        assert_eq!(
            r.drain(),
            "[... 1 chars of earlier output dropped ...]\n✓✓éé"
        );
        r.push("0123456789");
        assert_eq!(
            r.drain(),
            "[... 6 chars of earlier output dropped ...]\n6789"
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
        assert_eq!(text.len() - marker.len(), RING_CAP_CHARS);
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
