//! Git-style unified-diff hunks for the file tools' outputs: `@@ -a,b +c,d @@` headers (a zero
//! count backs its start up by one), ` `/`-`/`+` lines, 3 context lines, nearby changes merged.
//!
//! Two builders share one renderer:
//! - [`replacement_hunks`] (edit_file): one hunk per replacement site, sites whose context
//!   windows touch merged; each hunk is derived by re-applying the replacement to the affected
//!   whole-line region, so it is exact by construction and costs nothing on big files.
//! - [`line_diff`] (write_file): a line diff of two whole contents computed by `similar`.
//!
//! Display only: lines are capped at 2000 chars and a trailing `\r` is stripped. This module does
//! no I/O and knows nothing about budgets or the tools' texts.

use similar::{Algorithm, DiffOp, capture_diff_slices, group_diff_ops};

/// Context lines on each side of a change (git default).
pub const CONTEXT_LINES: usize = 3;

/// Max chars kept of one diff line.
const MAX_LINE_CHARS: usize = 2000;

/// Above this many cells (old middle lines × new middle lines) write_file shows a summary.
const MAX_DIFF_CELLS: usize = 250_000;

/// One hunk: 1-based header numbers (before the zero-count adjustment) and prefixed lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Hunk {
    /// The first old line of the hunk (1-based).
    pub old_start: usize,
    /// Old lines in the hunk.
    pub old_count: usize,
    /// The first new line of the hunk (1-based).
    pub new_start: usize,
    /// New lines in the hunk.
    pub new_count: usize,
    /// The hunk's lines, each prefixed with ` `, `-` or `+`.
    pub lines: Vec<String>,
}

impl Hunk {
    /// The header and lines joined with `\n` (no trailing newline).
    pub fn render(&self) -> String {
        let back = |start: usize, count: usize| {
            if count == 0 {
                start.saturating_sub(1)
            } else {
                start
            }
        };
        let mut out = format!(
            "@@ -{},{} +{},{} @@",
            back(self.old_start, self.old_count),
            self.old_count,
            back(self.new_start, self.new_count),
            self.new_count
        );
        for line in &self.lines {
            out.push('\n');
            out.push_str(line);
        }
        out
    }
}

/// `prefix` + the line with one trailing `\r` stripped, capped at 2000 chars.
fn display_line(prefix: char, line: &str) -> String {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let mut out = String::with_capacity(line.len().min(MAX_LINE_CHARS * 4) + 24);
    out.push(prefix);
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => {
            out.push_str(&line[..cut]);
            out.push_str("… [line truncated]");
        }
        None => out.push_str(line),
    }
    out
}

/// Lines as git (and `cat -n`) count them: a trailing newline ends the last line instead of
/// adding an empty one; "" has no lines.
pub fn content_lines(content: &str) -> Vec<&str> {
    if content.is_empty() {
        return Vec::new();
    }
    let mut lines: Vec<&str> = content.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    lines
}

/// Byte offsets where each line starts (the first is 0; one more after every `\n`).
fn line_starts(content: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(content.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

/// A hunk of edit_file and how many replacement sites it covers.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteHunk {
    /// The hunk.
    pub hunk: Hunk,
    /// Replacement sites it covers.
    pub sites: usize,
}

/// Hunks of replacing `old` (non-empty) by `new` in `content`: the first occurrence only, or all
/// of them (non-overlapping, left to right) with `replace_all`. At most `max_hunks` are built.
pub fn replacement_hunks(
    content: &str,
    old: &str,
    new: &str,
    replace_all: bool,
    max_hunks: usize,
) -> Vec<SiteHunk> {
    if old.is_empty() {
        return Vec::new();
    }
    let starts = line_starts(content);
    // 1-based line holding byte `pos` (a newline belongs to the line it ends).
    let line_of = |pos: usize| starts.partition_point(|&s| s <= pos);
    let line_start = |line: usize| starts.get(line - 1).copied().unwrap_or(content.len());
    let line_end = |line: usize| {
        let from = line_start(line);
        content[from..]
            .find('\n')
            .map_or(content.len(), |i| from + i + 1)
    };

    // Line ranges of the sites, merged when their context windows touch.
    struct Region {
        first: usize,
        last: usize,
        sites: usize,
    }
    let mut regions: Vec<Region> = Vec::new();
    let positions = content.match_indices(old).map(|(i, _)| i);
    for pos in positions.take(if replace_all { usize::MAX } else { 1 }) {
        let first = line_of(pos);
        let last = line_of(pos + old.len() - 1);
        match regions.last_mut() {
            Some(r) if first <= r.last + 2 * CONTEXT_LINES => {
                r.last = r.last.max(last);
                r.sites += 1;
            }
            _ => regions.push(Region {
                first,
                last,
                sites: 1,
            }),
        }
    }

    let old_lines = content_lines(content);
    let total = old_lines.len();
    let mut hunks = Vec::new();
    let mut shift: isize = 0; // new-minus-old line count of the hunks before
    for region in regions.into_iter().take(max_hunks) {
        let region_text = &content[line_start(region.first)..line_end(region.last)];
        let new_region = region_text.replace(old, new);
        let mut minus = content_lines(region_text);
        let mut plus = content_lines(&new_region);
        // Shared leading/trailing lines are context, not changes.
        let lead = minus
            .iter()
            .zip(plus.iter())
            .take_while(|(a, b)| a == b)
            .count();
        minus.drain(..lead);
        plus.drain(..lead);
        let tail = minus
            .iter()
            .rev()
            .zip(plus.iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        minus.truncate(minus.len() - tail);
        plus.truncate(plus.len() - tail);

        let change_start = region.first + lead; // first changed old line
        let change_end = region.last - tail; // last changed old line (change_start - 1 if none)
        let pre_from = change_start.saturating_sub(CONTEXT_LINES).max(1);
        let post_to = total.min(change_end + CONTEXT_LINES);
        let mut lines = Vec::new();
        for n in pre_from..change_start {
            lines.push(display_line(
                ' ',
                old_lines.get(n - 1).copied().unwrap_or(""),
            ));
        }
        lines.extend(minus.iter().map(|l| display_line('-', l)));
        lines.extend(plus.iter().map(|l| display_line('+', l)));
        for n in change_end + 1..=post_to {
            lines.push(display_line(
                ' ',
                old_lines.get(n - 1).copied().unwrap_or(""),
            ));
        }
        let context = (change_start - pre_from) + post_to.saturating_sub(change_end);
        hunks.push(SiteHunk {
            hunk: Hunk {
                old_start: pre_from,
                old_count: context + minus.len(),
                new_start: pre_from.saturating_add_signed(shift),
                new_count: context + plus.len(),
                lines,
            },
            sites: region.sites,
        });
        shift += plus.len() as isize - minus.len() as isize;
    }
    hunks
}

/// The outcome of diffing two whole contents.
#[derive(Debug, Clone, PartialEq)]
pub enum LineDiff {
    /// The contents are equal.
    Identical,
    /// Too big to diff cheaply: sizes of the differing middles (after the common prefix/suffix).
    TooLarge {
        /// Lines of the new middle.
        plus: usize,
        /// Lines of the old middle.
        minus: usize,
    },
    /// The differences as hunks.
    Hunks {
        /// The hunks, in file order.
        hunks: Vec<Hunk>,
        /// Lines added.
        plus: usize,
        /// Lines removed.
        minus: usize,
    },
}

/// Line diff of `old` → `new` with 3-line-context hunks.
pub fn line_diff(old: &str, new: &str) -> LineDiff {
    if old == new {
        return LineDiff::Identical;
    }
    let a = content_lines(old);
    let b = content_lines(new);
    let prefix = a.iter().zip(b.iter()).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let mid_a = &a[prefix..a.len() - suffix];
    let mid_b = &b[prefix..b.len() - suffix];
    if mid_a.len().saturating_mul(mid_b.len()) > MAX_DIFF_CELLS {
        return LineDiff::TooLarge {
            plus: mid_b.len(),
            minus: mid_a.len(),
        };
    }

    // The middle is bounded by the guard, so the exact (minimal) algorithm is cheap.
    let mut ops = Vec::new();
    if prefix > 0 {
        ops.push(DiffOp::Equal {
            old_index: 0,
            new_index: 0,
            len: prefix,
        });
    }
    for op in capture_diff_slices(Algorithm::RawMyers, mid_a, mid_b) {
        ops.push(offset_op(op, prefix));
    }
    if suffix > 0 {
        ops.push(DiffOp::Equal {
            old_index: a.len() - suffix,
            new_index: b.len() - suffix,
            len: suffix,
        });
    }

    let (mut plus, mut minus) = (0, 0);
    let mut hunks = Vec::new();
    for group in group_diff_ops(ops, CONTEXT_LINES) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let old_range = first.old_range().start..last.old_range().end;
        let new_range = first.new_range().start..last.new_range().end;
        let mut lines = Vec::new();
        for op in &group {
            let (old_r, new_r) = (op.old_range(), op.new_range());
            if let DiffOp::Equal { .. } = op {
                lines.extend(a[old_r].iter().map(|l| display_line(' ', l)));
                continue;
            }
            minus += old_r.len();
            plus += new_r.len();
            lines.extend(a[old_r].iter().map(|l| display_line('-', l)));
            lines.extend(b[new_r].iter().map(|l| display_line('+', l)));
        }
        hunks.push(Hunk {
            old_start: old_range.start + 1,
            old_count: old_range.len(),
            new_start: new_range.start + 1,
            new_count: new_range.len(),
            lines,
        });
    }
    LineDiff::Hunks { hunks, plus, minus }
}

/// Shifts an op computed over the middles to whole-content indices.
fn offset_op(op: DiffOp, by: usize) -> DiffOp {
    match op {
        DiffOp::Equal {
            old_index,
            new_index,
            len,
        } => DiffOp::Equal {
            old_index: old_index + by,
            new_index: new_index + by,
            len,
        },
        DiffOp::Delete {
            old_index,
            old_len,
            new_index,
        } => DiffOp::Delete {
            old_index: old_index + by,
            old_len,
            new_index: new_index + by,
        },
        DiffOp::Insert {
            old_index,
            new_index,
            new_len,
        } => DiffOp::Insert {
            old_index: old_index + by,
            new_index: new_index + by,
            new_len,
        },
        DiffOp::Replace {
            old_index,
            old_len,
            new_index,
            new_len,
        } => DiffOp::Replace {
            old_index: old_index + by,
            old_len,
            new_index: new_index + by,
            new_len,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render_all(hunks: &[Hunk]) -> String {
        hunks
            .iter()
            .map(Hunk::render)
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("l{i}\n")).collect()
    }

    #[test]
    fn content_lines_like_cat_n() {
        assert!(content_lines("").is_empty());
        assert_eq!(content_lines("a"), vec!["a"]);
        assert_eq!(content_lines("a\n"), vec!["a"]);
        assert_eq!(content_lines("a\n\n"), vec!["a", ""]);
    }

    #[test]
    fn single_site_hunk_with_context() {
        let content = numbered(10);
        let h = replacement_hunks(&content, "l5\n", "five\nFIVE\n", false, 5);
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].sites, 1);
        assert_eq!(
            h[0].hunk.render(),
            "@@ -2,7 +2,8 @@\n l2\n l3\n l4\n-l5\n+five\n+FIVE\n l6\n l7\n l8"
        );
    }

    #[test]
    fn pure_removal_backs_up_zero_count_start() {
        let h = replacement_hunks("only\n", "only\n", "", false, 5);
        assert_eq!(h[0].hunk.render(), "@@ -1,1 +0,0 @@\n-only");
    }

    #[test]
    fn nearby_sites_merge_and_far_sites_split() {
        // Sites on lines 2 and 8 (gap 6): windows touch → one hunk. Line 20: separate hunk.
        let mut lines: Vec<String> = (1..=25).map(|i| format!("l{i}")).collect();
        for i in [1, 7, 19] {
            lines[i] = "X".to_string();
        }
        let content = lines.join("\n") + "\n";
        let h = replacement_hunks(&content, "X", "Y", true, 5);
        assert_eq!(h.len(), 2);
        assert_eq!(h[0].sites, 2);
        assert_eq!(h[1].sites, 1);
        assert_eq!(h[0].hunk.old_start, 1);
        assert_eq!(h[0].hunk.old_count, 11);
        assert_eq!(
            h[1].hunk.render(),
            "@@ -17,7 +17,7 @@\n l17\n l18\n l19\n-X\n+Y\n l21\n l22\n l23"
        );
    }

    #[test]
    fn new_start_follows_earlier_line_shifts() {
        let content = format!("A\n{}A\n", numbered(10));
        let h = replacement_hunks(&content, "A\n", "B\nB\n", true, 5);
        assert_eq!(h.len(), 2);
        assert_eq!(
            h[0].hunk.render(),
            "@@ -1,4 +1,5 @@\n-A\n+B\n+B\n l1\n l2\n l3"
        );
        assert_eq!(
            h[1].hunk.render(),
            "@@ -9,4 +10,5 @@\n l8\n l9\n l10\n-A\n+B\n+B"
        );
    }

    #[test]
    fn max_hunks_caps_the_build() {
        let content = (0..40).map(|i| {
            if i % 10 == 0 {
                "X\n".to_string()
            } else {
                format!("{i}\n")
            }
        });
        let content: String = content.collect();
        assert_eq!(replacement_hunks(&content, "X", "Y", true, 2).len(), 2);
        assert_eq!(replacement_hunks(&content, "X", "Y", true, 5).len(), 4);
    }

    #[test]
    fn display_strips_cr_and_caps_long_lines() {
        let long = "é".repeat(2500);
        let content = format!("a\r\n{long}\r\n");
        let h = replacement_hunks(&content, "a", "b", false, 5);
        let expected = format!(
            "@@ -1,2 +1,2 @@\n-a\n+b\n {}… [line truncated]",
            "é".repeat(2000)
        );
        assert_eq!(h[0].hunk.render(), expected);
    }

    #[test]
    fn line_diff_identical_and_small() {
        assert_eq!(line_diff("a\n", "a\n"), LineDiff::Identical);
        let old = numbered(12);
        let new = old.replace("l6\n", "six\n");
        let LineDiff::Hunks { hunks, plus, minus } = line_diff(&old, &new) else {
            panic!("expected hunks");
        };
        assert_eq!((plus, minus), (1, 1));
        assert_eq!(
            render_all(&hunks),
            "@@ -3,7 +3,7 @@\n l3\n l4\n l5\n-l6\n+six\n l7\n l8\n l9"
        );
    }

    #[test]
    fn line_diff_splits_far_changes_and_handles_insert_at_start() {
        let old = numbered(20);
        let new = format!("l0\n{}", old.replace("l18\n", ""));
        let LineDiff::Hunks { hunks, plus, minus } = line_diff(&old, &new) else {
            panic!("expected hunks");
        };
        assert_eq!((plus, minus), (1, 1));
        assert_eq!(
            render_all(&hunks),
            "@@ -1,3 +1,4 @@\n+l0\n l1\n l2\n l3\n@@ -15,6 +16,5 @@\n l15\n l16\n l17\n-l18\n l19\n l20"
        );
        assert_eq!(
            line_diff("", "x\n"),
            LineDiff::Hunks {
                hunks: vec![Hunk {
                    old_start: 1,
                    old_count: 0,
                    new_start: 1,
                    new_count: 1,
                    lines: vec!["+x".to_string()],
                }],
                plus: 1,
                minus: 0,
            }
        );
        assert_eq!(line_diff("", "x\n"), line_diff("", "x"));
    }

    #[test]
    fn line_diff_too_large_reports_middle_sizes() {
        let old: String = (0..600).map(|i| format!("a{i}\n")).collect();
        let new: String = (0..500).map(|i| format!("b{i}\n")).collect();
        assert_eq!(
            line_diff(&format!("head\n{old}tail\n"), &format!("head\n{new}tail\n")),
            LineDiff::TooLarge {
                plus: 500,
                minus: 600
            }
        );
    }
}
