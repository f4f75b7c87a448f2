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
    /// A listing of at most `budget` characters, its text sized for a file of `size_hint`
    /// bytes (rows add a number and a tab to each line; a file that reports no size, or more
    /// than the budget, grows the text as it goes).
    pub(super) fn new(budget: usize, size_hint: u64) -> Self {
        let hint = usize::try_from(size_hint).unwrap_or(usize::MAX);
        Listing {
            budget,
            text: String::with_capacity(
                hint.saturating_add(hint / 2).saturating_add(64).min(budget),
            ),
            used: 0,
            shown: 0,
            trimmed: false,
        }
    }

    /// Adds one row if it fits (the first row is hard-cut instead); `false` once full.
    pub(super) fn push(&mut self, line_no: u64, bytes: &[u8], cut: bool) -> bool {
        let content = decode_line(bytes, cut);
        let row = Row::of(line_no, &content, cut);
        let cost = row.chars() + usize::from(self.shown > 0);
        if self.used + cost > self.budget {
            if self.shown == 0 {
                let mut whole = String::new();
                row.write_to(&mut whole);
                self.text = whole.chars().take(self.budget).collect();
                self.used = self.budget;
                self.shown = 1;
            }
            self.trimmed = true;
            return false;
        }
        if self.shown > 0 {
            self.text.push('\n');
        }
        row.write_to(&mut self.text);
        self.used += cost;
        self.shown += 1;
        true
    }
}

/// Marks a displayed line cut short.
const TRUNCATED: &str = "… [line truncated]";

/// Columns the line number is right-aligned in.
const NUMBER_WIDTH: usize = 6;

/// The spaces a short line number is padded with.
const PADDING: &str = "      ";

/// One `cat -n` row: the number right-aligned in 6 columns, a TAB, the content (over 2000
/// characters, or cut by the byte cap: the first 2000 characters and `… [line truncated]`).
/// Written straight into the listing, without formatting machinery or a buffer of its own.
struct Row<'a> {
    line_no: u64,
    shown: &'a str,
    shown_chars: usize,
    marked: bool,
}

impl<'a> Row<'a> {
    fn of(line_no: u64, content: &'a str, cut: bool) -> Self {
        let chars = content.chars().count();
        let (shown, shown_chars, marked) = if chars > MAX_LINE_CHARS {
            let end = content
                .char_indices()
                .nth(MAX_LINE_CHARS)
                .map_or(content.len(), |(end, _)| end);
            (&content[..end], MAX_LINE_CHARS, true)
        } else {
            (content, chars, cut)
        };
        Row {
            line_no,
            shown,
            shown_chars,
            marked,
        }
    }

    /// Characters of the row.
    fn chars(&self) -> usize {
        let digits = self.line_no.checked_ilog10().unwrap_or(0) as usize + 1;
        let marker = if self.marked {
            TRUNCATED.chars().count()
        } else {
            0
        };
        digits.max(NUMBER_WIDTH) + 1 + self.shown_chars + marker
    }

    fn write_to(&self, out: &mut String) {
        let mut number = itoa::Buffer::new();
        let digits = number.format(self.line_no);
        let pad = NUMBER_WIDTH.saturating_sub(digits.len());
        out.reserve(pad + digits.len() + 1 + self.shown.len() + TRUNCATED.len());
        out.push_str(&PADDING[..pad]);
        out.push_str(digits);
        out.push('\t');
        out.push_str(self.shown);
        if self.marked {
            out.push_str(TRUNCATED);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The row as `format!` spells the rule, beside the row written in place.
    fn formatted(line_no: u64, content: &str, cut: bool) -> String {
        match content.char_indices().nth(MAX_LINE_CHARS) {
            Some((end, _)) => format!("{line_no:>6}\t{}{TRUNCATED}", &content[..end]),
            None if cut => format!("{line_no:>6}\t{content}{TRUNCATED}"),
            None => format!("{line_no:>6}\t{content}"),
        }
    }

    #[test]
    fn a_row_is_what_the_format_rule_gives_and_counts_its_characters() {
        let long = "é".repeat(MAX_LINE_CHARS + 1);
        let exact = "x".repeat(MAX_LINE_CHARS);
        for line_no in [1, 9, 10, 99_999, 999_999, 1_000_000, 12_345_678, u64::MAX] {
            for content in ["", "plain", "tab\there", "ünïcödé ☃", &exact, &long] {
                for cut in [false, true] {
                    let row = Row::of(line_no, content, cut);
                    let chars = row.chars();
                    let mut written = String::from("kept");
                    row.write_to(&mut written);
                    let want = formatted(line_no, content, cut);
                    assert_eq!(written, format!("kept{want}"), "{line_no} {cut}");
                    assert_eq!(chars, want.chars().count(), "{line_no} {cut}");
                }
            }
        }
    }
}
