//! Rendering of read_file's window (`docs/tools.md#read_file`): `cat -n` rows with the long-line marker,
//! the self-budget that keeps the trailer rows intact, and the texts that depend on the scan
//! outcome (binary, scan cap, offset past the end, CRLF and continuation notes).
//!
//! It does no I/O and no argument checking; `read_file` feeds it the scanned lines.

use super::ReadFileError;
use super::scan::{ScanOutcome, decode_line};

/// Characters kept of one displayed line before `… [line truncated]`.
const MAX_LINE_CHARS: usize = 2000;

/// Turns a scan and its rendered window into the reply text (or the failure text).
pub(super) fn finish(
    file_path: &str,
    offset: i64,
    limit: i64,
    outcome: &ScanOutcome,
    listing: Listing,
) -> Result<String, ReadFileError> {
    if outcome.binary {
        return Err(ReadFileError::Binary {
            file_path: file_path.to_string(),
        });
    }
    if listing.shown == 0 && !outcome.total_known {
        let last = i128::from(offset) + i128::from(limit) - 1;
        return Err(ReadFileError::ScanCap {
            file_path: file_path.to_string(),
            offset,
            last,
            scanned: count_lines(outcome.total),
        });
    }
    let first = u64::try_from(offset).unwrap_or(1);
    if outcome.total_known && first > outcome.total {
        return Err(ReadFileError::PastEnd {
            file_path: file_path.to_string(),
            offset,
            total: count_lines(outcome.total),
        });
    }
    let shown_end = (first + listing.shown).saturating_sub(1);
    let more_remains = listing.trimmed || !outcome.total_known || shown_end < outcome.total;
    let mut text = listing.text;
    let mut trailers = Vec::new();
    if outcome.saw_crlf {
        trailers.push("(file uses CRLF line endings)".to_string());
    }
    if more_remains {
        let total = if outcome.total_known {
            format!("file has {} lines total", outcome.total)
        } else {
            format!("file has more than {} lines", outcome.total)
        };
        let trimmed = if listing.trimmed {
            " (output limit reached)"
        } else {
            ""
        };
        trailers.push(format!(
            "[{total}; showing {offset}-{shown_end}{trimmed} — call again with offset to continue]"
        ));
    }
    for trailer in trailers {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&trailer);
    }
    Ok(text)
}

/// The rendered window, kept within its character budget as lines arrive.
pub(super) struct Listing {
    budget: usize,
    text: String,
    used: usize,
    shown: u64,
    trimmed: bool,
}

impl Listing {
    pub(super) fn new(budget: usize) -> Self {
        Listing {
            budget,
            text: String::new(),
            used: 0,
            shown: 0,
            trimmed: false,
        }
    }

    /// Adds one row if it fits (the first row is hard-cut instead); `false` once full.
    pub(super) fn push(&mut self, line_no: u64, bytes: Vec<u8>, cut: bool) -> bool {
        let row = numbered_line(line_no, &decode_line(bytes, cut), cut);
        let cost = row.chars().count() + usize::from(self.shown > 0);
        if self.used + cost > self.budget {
            if self.shown == 0 {
                self.text = row.chars().take(self.budget).collect();
                self.used = self.budget;
                self.shown = 1;
            }
            self.trimmed = true;
            return false;
        }
        if self.shown > 0 {
            self.text.push('\n');
        }
        self.text.push_str(&row);
        self.used += cost;
        self.shown += 1;
        true
    }
}

/// `cat -n` row: the number right-aligned in 6 columns, a TAB, the content (over 2000
/// characters, or cut by the byte cap: the first 2000 characters and `… [line truncated]`).
fn numbered_line(line_no: u64, content: &str, cut: bool) -> String {
    match content.char_indices().nth(MAX_LINE_CHARS) {
        Some((end, _)) => format!("{line_no:>6}\t{}… [line truncated]", &content[..end]),
        None if cut => format!("{line_no:>6}\t{content}… [line truncated]"),
        None => format!("{line_no:>6}\t{content}"),
    }
}

/// `<n> line` / `<n> lines`.
fn count_lines(n: u64) -> String {
    if n == 1 {
        "1 line".to_string()
    } else {
        format!("{n} lines")
    }
}
