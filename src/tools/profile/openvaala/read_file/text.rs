//! The text side of the openvaala read_file: skipping to a 1-based line, collecting whole lines
//! up to a line count and a byte budget, the UTF-8 and line-length checks, and the numbered
//! rendering with the note saying where to continue. Pure over any reader.

use std::io::{BufRead, BufReader, Read};

/// Why lines cannot be shown.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(super) enum TextError {
    #[error("the file is not UTF-8 text (invalid bytes on line {0}).")]
    NotUtf8(u64),
    #[error("line {line} is longer than 64 KB ({bytes} bytes or more); it cannot be shown.")]
    LineTooLong { line: u64, bytes: usize },
    #[error("offset {offset} is past the end of the file ({lines} lines).")]
    PastEnd { offset: u64, lines: u64 },
    #[error("{0}")]
    Io(String),
}

/// Lines read for one result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LinesPage {
    pub lines: Vec<String>,
    /// Why the page ended before the end of the file: the next line's number.
    pub more: Option<More>,
}

/// Where the next page starts and why this one stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum More {
    /// `limit` lines were read.
    Limit(u64),
    /// The byte budget was reached.
    Budget(u64),
}

/// One line of at most `max` bytes (without its `\n`, and a `\r` before it); `None` at EOF.
fn next_line<R: BufRead>(r: &mut R, n: u64, max: usize) -> Result<Option<String>, TextError> {
    let mut buf = Vec::new();
    let got = r
        .by_ref()
        .take(max as u64 + 2)
        .read_until(b'\n', &mut buf)
        .map_err(|e| TextError::Io(e.to_string()))?;
    if got == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
    }
    if buf.len() > max {
        return Err(TextError::LineTooLong {
            line: n,
            bytes: buf.len(),
        });
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| TextError::NotUtf8(n))
}

/// The numbered prefix of line `n`.
fn prefix(n: u64) -> String {
    format!("{n:>6}\t")
}

/// Reads `limit` lines from line `offset` (1-based), stopping before the numbered lines would
/// pass `budget` bytes (the first line always fits when it is at most `budget` bytes long).
pub(super) fn read_lines<R: Read>(
    file: R,
    offset: u64,
    limit: u64,
    budget: usize,
) -> Result<LinesPage, TextError> {
    let mut r = BufReader::new(file);
    let mut n = 1u64;
    while n < offset {
        if next_line(&mut r, n, budget)?.is_none() {
            return Err(TextError::PastEnd {
                offset,
                lines: n - 1,
            });
        }
        n += 1;
    }
    let mut lines = Vec::new();
    let mut used = 0usize;
    loop {
        let Some(line) = next_line(&mut r, n, budget)? else {
            if lines.is_empty() && offset > 1 {
                return Err(TextError::PastEnd {
                    offset,
                    lines: n - 1,
                });
            }
            return Ok(LinesPage { lines, more: None });
        };
        if lines.len() as u64 == limit {
            return Ok(LinesPage {
                lines,
                more: Some(More::Limit(n)),
            });
        }
        let cost = prefix(n).len() + line.len() + 1;
        if !lines.is_empty() && used + cost > budget {
            return Ok(LinesPage {
                lines,
                more: Some(More::Budget(n)),
            });
        }
        used += cost;
        lines.push(line);
        n += 1;
    }
}

impl LinesPage {
    /// The numbered lines (from line `offset`), then the continuation note when there is more.
    pub(super) fn render(&self, offset: u64) -> String {
        let mut out = String::new();
        for (i, line) in self.lines.iter().enumerate() {
            out.push_str(&prefix(offset + i as u64));
            out.push_str(line);
            out.push('\n');
        }
        if self.lines.is_empty() {
            out.push_str("[the file is empty]");
        }
        match self.more {
            None => {}
            Some(More::Limit(next)) => {
                out.push_str(&format!("[more lines follow: continue with offset={next}]"))
            }
            Some(More::Budget(next)) => out.push_str(&format!(
                "[64 KB per result reached: continue with offset={next}]"
            )),
        }
        while out.ends_with('\n') {
            out.pop();
        }
        out
    }
}
