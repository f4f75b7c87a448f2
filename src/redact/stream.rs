//! Scrubbing a text that arrives in pieces (a streamed partial): a secret split across two
//! pieces, in any ASCII case, is replaced as if the text had come whole.
//!
//! Each piece is joined to what was held back before; what ends it and may begin a secret is
//! held back again (at most the longest secret minus one byte), the rest is scrubbed and may be
//! sent. It holds text only: which stream a piece belongs to is its caller's business.

use super::Redactor;

/// The held-back end of one streamed text.
#[derive(Debug, Default)]
pub struct PieceScrubber {
    held: String,
}

impl PieceScrubber {
    /// What may be sent of `piece` now (scrubbed); the end that may begin a secret is kept for
    /// the next piece.
    pub fn push(&mut self, redactor: &Redactor, piece: &str) -> String {
        let mut text = std::mem::take(&mut self.held);
        text.push_str(piece);
        let bytes = text.as_bytes();
        let mut cut = bytes.len() - redactor.pending_tail(bytes);
        // A whole secret across the cut is sent whole (scrubbed), never split.
        for (start, end) in redactor.secret_ranges(bytes) {
            if start < cut && end > cut {
                cut = end;
            }
        }
        // A secret begins and ends on character boundaries, so `cut` is one; a cut inside a
        // character holds the whole character back.
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        self.held = text.split_off(cut);
        redactor.redact(&text).into_owned()
    }

    /// The rest, scrubbed: the stream has ended.
    pub fn finish(&mut self, redactor: &Redactor) -> String {
        let rest = std::mem::take(&mut self.held);
        redactor.redact(&rest).into_owned()
    }

    /// Whether nothing is held back.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(r: &Redactor, parts: &[&str]) -> Vec<String> {
        let mut s = PieceScrubber::default();
        let mut out: Vec<String> = parts.iter().map(|p| s.push(r, p)).collect();
        out.push(s.finish(r));
        out
    }

    #[test]
    fn a_secret_split_across_pieces_in_any_case_is_scrubbed() {
        let r = Redactor::new(["sk-Split-9876"]).unwrap();
        let out = pieces(&r, &["key: SK-sp", "LIT-98", "76 and sk-split-9876", "!"]);
        assert_eq!(out, ["key: ", "", "[redacted] and [redacted]", "!", ""]);
        // Plain text is not held back.
        assert_eq!(pieces(&r, &["hello ", "world"]), ["hello ", "world", ""]);
        // What only looked like a beginning goes on with the next piece or at the end.
        assert_eq!(pieces(&r, &["a sk-", "x"]), ["a ", "sk-x", ""]);
        assert_eq!(pieces(&r, &["ends sk-sp"]), ["ends ", "sk-sp"]);
        // Multi-byte characters are never split.
        assert_eq!(
            pieces(&r, &["é sk", "-Split-9876 é"]),
            ["é ", "[redacted] é", ""]
        );
    }
}
