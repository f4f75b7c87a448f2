//! Finding a hunk's lines in a file, the way codex's apply-patch does: forward from a start
//! line, first exactly, then ignoring trailing whitespace, then ignoring surrounding
//! whitespace, then with Unicode punctuation and spaces normalised to ASCII. An end-of-file
//! hunk is looked for at the end of the file first.
//!
//! Pure functions over lines; no I/O.

use std::borrow::Cow;

/// The first index `>= start` where `pattern` matches `lines` (see the module header for the
/// ladder). An empty pattern matches at `start`.
pub fn seek_sequence(
    lines: &[String],
    pattern: &[String],
    start: usize,
    end_of_file: bool,
) -> Option<usize> {
    if pattern.is_empty() {
        return Some(start);
    }
    if pattern.len() > lines.len() {
        return None;
    }
    let last = lines.len() - pattern.len();
    let from = if end_of_file { last } else { start };
    if from > last {
        return None;
    }
    let rungs: [fn(&str) -> Cow<'_, str>; 4] = [
        |s| Cow::Borrowed(s),
        |s| Cow::Borrowed(s.trim_end()),
        |s| Cow::Borrowed(s.trim()),
        |s| Cow::Owned(normalise(s)),
    ];
    for rung in rungs {
        let want: Vec<Cow<'_, str>> = pattern.iter().map(|p| rung(p)).collect();
        let found = (from..=last).find(|&i| {
            lines[i..i + pattern.len()]
                .iter()
                .zip(&want)
                .all(|(l, w)| rung(l) == *w)
        });
        if found.is_some() {
            return found;
        }
    }
    None
}

/// `s` trimmed, with typographic dashes, quotes and spaces replaced by their ASCII forms.
pub fn normalise(s: &str) -> String {
    s.trim()
        .chars()
        .map(|c| match c {
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
            '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            other => other,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn each_rung_of_the_ladder() {
        let file = v(&["foo   ", "  bar  ", "x \u{2014} \u{201C}y\u{201D}", "end"]);
        assert_eq!(seek_sequence(&file, &v(&["end"]), 0, false), Some(3));
        assert_eq!(seek_sequence(&file, &v(&["foo"]), 0, false), Some(0));
        assert_eq!(seek_sequence(&file, &v(&["bar"]), 0, false), Some(1));
        assert_eq!(seek_sequence(&file, &v(&["x - \"y\""]), 0, false), Some(2));
        assert_eq!(seek_sequence(&file, &v(&["nothing"]), 0, false), None);
    }

    #[test]
    fn exact_beats_fuzzy_and_search_is_forward_only() {
        let file = v(&["a ", "a", "b", "a"]);
        // The exact rung wins over an earlier trailing-space match.
        assert_eq!(seek_sequence(&file, &v(&["a"]), 0, false), Some(1));
        assert_eq!(seek_sequence(&file, &v(&["a"]), 2, false), Some(3));
        assert_eq!(seek_sequence(&file, &v(&["b"]), 3, false), None);
    }

    #[test]
    fn end_of_file_and_edges() {
        let file = v(&["a", "b", "a"]);
        assert_eq!(seek_sequence(&file, &v(&["a"]), 0, true), Some(2));
        assert_eq!(seek_sequence(&file, &v(&["b"]), 0, true), None);
        assert_eq!(seek_sequence(&file, &[], 2, false), Some(2));
        assert_eq!(
            seek_sequence(&file, &v(&["a", "b", "a", "c"]), 0, false),
            None
        );
        assert_eq!(seek_sequence(&file, &v(&["a"]), 9, false), None);
    }
}
