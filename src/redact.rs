//! Scrubbing secret values (the provider key, the serve token) out of text: every occurrence,
//! in any ASCII case, becomes `[redacted]`. Sessions apply it to what they record and stream;
//! the binary's log writer applies the process-wide set to every log line.
//!
//! It knows values only, never where they come from; it must not log what it redacts. A text
//! that arrives in pieces is scrubbed across them by [`stream::PieceScrubber`].

pub mod stream;

use std::borrow::Cow;
use std::io::Write;
use std::sync::{Arc, RwLock};

use regex::bytes::Regex;

/// What a secret becomes.
pub const REDACTED: &str = "[redacted]";

/// Shorter values are not scrubbed (they would blot out ordinary text).
pub const MIN_SECRET_LEN: usize = 4;

/// A set of secret values to scrub, matched case-insensitively (ASCII).
#[derive(Clone)]
pub struct Redactor {
    pattern: Regex,
    count: usize,
    /// Every value (and JSON-escaped form), ASCII lower-cased: what a piece's end may begin.
    needles: Vec<Vec<u8>>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} secrets)", self.count)
    }
}

/// The pattern text of one literal: ASCII alphanumerics as they are (so `(?i)` folds their
/// case), every other byte as `\xHH` (matched as that byte).
fn literal(value: &str) -> String {
    let mut out = String::with_capacity(value.len() * 2);
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

impl Redactor {
    /// A redactor of `values` (trimmed; shorter than [`MIN_SECRET_LEN`] ignored), also matching
    /// each one's JSON-escaped form. `None` when nothing is left to scrub.
    pub fn new<I, S>(values: I) -> Option<Redactor>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut needles: Vec<String> = Vec::new();
        for v in values {
            let v = v.as_ref().trim();
            if v.len() < MIN_SECRET_LEN {
                continue;
            }
            let escaped = serde_json::to_string(v).unwrap_or_default();
            let escaped = escaped.trim_matches('"').to_string();
            for n in [v.to_string(), escaped] {
                if !n.is_empty() && !needles.contains(&n) {
                    needles.push(n);
                }
            }
        }
        if needles.is_empty() {
            return None;
        }
        // Longest first: a secret that contains another is scrubbed whole.
        needles.sort_by_key(|n| std::cmp::Reverse(n.len()));
        let alternation: Vec<String> = needles.iter().map(|n| literal(n)).collect();
        let pattern = Regex::new(&format!("(?i-u)(?:{})", alternation.join("|"))).ok()?;
        Some(Redactor {
            pattern,
            count: needles.len(),
            needles: needles
                .iter()
                .map(|n| n.as_bytes().to_ascii_lowercase())
                .collect(),
        })
    }

    /// Whether `bytes` holds a secret.
    pub fn matches(&self, bytes: &[u8]) -> bool {
        self.pattern.is_match(bytes)
    }

    /// The byte ranges of the secrets in `bytes`, in order (those [`Self::redact_bytes`]
    /// replaces).
    pub fn secret_ranges<'a>(
        &'a self,
        bytes: &'a [u8],
    ) -> impl Iterator<Item = (usize, usize)> + 'a {
        self.pattern.find_iter(bytes).map(|m| (m.start(), m.end()))
    }

    /// The length of the longest end of `bytes` that begins a secret (a proper prefix of one,
    /// in any ASCII case): what may turn into a secret with the bytes that come next.
    pub fn pending_tail(&self, bytes: &[u8]) -> usize {
        let mut longest = 0;
        for needle in &self.needles {
            let most = needle.len().saturating_sub(1).min(bytes.len());
            for k in (longest + 1..=most).rev() {
                if bytes[bytes.len() - k..].eq_ignore_ascii_case(&needle[..k]) {
                    longest = k;
                    break;
                }
            }
        }
        longest
    }

    /// `bytes` with every secret replaced, or `None` when it holds none.
    pub fn redact_bytes(&self, bytes: &[u8]) -> Option<Vec<u8>> {
        if !self.matches(bytes) {
            return None;
        }
        Some(
            self.pattern
                .replace_all(bytes, REDACTED.as_bytes())
                .into_owned(),
        )
    }

    /// `text` with every secret replaced.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.redact_bytes(text.as_bytes()) {
            // Whole secrets (valid UTF-8 themselves) were replaced: still valid UTF-8.
            Some(b) => Cow::Owned(String::from_utf8_lossy(&b).into_owned()),
            None => Cow::Borrowed(text),
        }
    }
}

/// The secrets scrubbed from this process's log lines.
static LOG_SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());
static LOG_REDACTOR: RwLock<Option<Arc<Redactor>>> = RwLock::new(None);

/// Adds `value` to the secrets scrubbed from every log line written through [`LogWriter`].
pub fn redact_in_logs(value: &str) {
    let value = value.trim();
    if value.len() < MIN_SECRET_LEN {
        return;
    }
    let Ok(mut list) = LOG_SECRETS.write() else {
        return;
    };
    if list.iter().any(|v| v == value) {
        return;
    }
    list.push(value.to_string());
    let redactor = Redactor::new(list.iter()).map(Arc::new);
    if let Ok(mut r) = LOG_REDACTOR.write() {
        *r = redactor;
    }
}

/// The log sink of the binary: stderr, with the registered secrets scrubbed. `tracing`'s
/// formatter writes each event with one `write_all`, so a secret never straddles two writes.
#[derive(Debug, Default, Clone, Copy)]
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let redactor = LOG_REDACTOR.read().ok().and_then(|r| r.clone());
        let mut err = std::io::stderr().lock();
        match redactor.and_then(|r| r.redact_bytes(buf)) {
            Some(clean) => err.write_all(&clean)?,
            None => err.write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;
    fn make_writer(&'a self) -> Self::Writer {
        LogWriter
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_variant_is_scrubbed() {
        let r = Redactor::new(["sk-TestKey1234"]).unwrap();
        assert_eq!(
            r.redact("bearer sk-testkey1234 and SK-TESTKEY1234, sk-TestKey1234!"),
            "bearer [redacted] and [redacted], [redacted]!"
        );
        assert!(matches!(r.redact("nothing here"), Cow::Borrowed(_)));
        assert_eq!(r.redact_bytes(b"none"), None);
    }

    #[test]
    fn a_pending_tail_is_the_longest_end_that_begins_a_secret() {
        let r = Redactor::new(["sk-Key-1234", "tokenvalue"]).unwrap();
        assert_eq!(r.pending_tail(b"plain word"), 0);
        assert_eq!(r.pending_tail(b"the key SK-k"), 4);
        assert_eq!(r.pending_tail(b"a t"), 1);
        assert_eq!(r.pending_tail(b"tokenvalu"), 9);
        // A whole secret is no longer pending: it is found as it is.
        assert_eq!(r.pending_tail(b"tokenvalue"), 0);
        assert_eq!(r.pending_tail(b""), 0);
        let ranges: Vec<_> = r.secret_ranges(b"x sk-key-1234 y").collect();
        assert_eq!(ranges, [(2, 13)]);
    }

    #[test]
    fn short_empty_and_special_values() {
        assert!(Redactor::new(["", "abc", "  "]).is_none());
        let r = Redactor::new(["a.b*c", "tok\"en\\x", "abcd", "abcdefgh"]).unwrap();
        assert_eq!(r.redact("a.b*c axbyc"), "[redacted] axbyc");
        // The JSON-escaped form is found in a serialized record.
        let json = serde_json::to_string("tok\"en\\x").unwrap();
        assert_eq!(r.redact(&json), "\"[redacted]\"");
        assert_eq!(r.redact("ABCDEFGH abcd"), "[redacted] [redacted]");
        assert_eq!(r.redact("é abcd é"), "é [redacted] é");
    }
}
