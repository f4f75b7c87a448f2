//! Finding a hunk's lines in a file, the way codex's apply-patch does: forward from a start
//! line, first exactly, then ignoring trailing whitespace, then ignoring surrounding
//! whitespace, then with Unicode punctuation and spaces normalised to ASCII. An end-of-file
//! hunk is looked for at the end of the file.
//!
//! The search is linear in the file and the hunk, whatever they hold: each rung reads every
//! line of the file once into a number (equal lines under the rung, equal numbers), and a hunk
//! is found with Knuth–Morris–Pratt over those numbers. The coarsest rung is tried first: a
//! hunk it cannot find is found by no rung, and a finer rung's match cannot lie before the
//! coarsest rung's first one. A long search asks its `stop` every [`STOP_EVERY`] steps and
//! gives up with [`Stopped`] once it says so.
//!
//! Pure functions over lines; no I/O.

use std::borrow::Cow;
use std::collections::HashMap;

/// Steps of a search between two questions to its `stop`.
pub const STOP_EVERY: usize = 1 << 16;

/// The search was given up because its `stop` said so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped;

/// How a rung sees a line.
type Rung = for<'s> fn(&'s str) -> Cow<'s, str>;

/// The ladder, finest first.
const RUNGS: [Rung; 4] = [
    |s| Cow::Borrowed(s),
    |s| Cow::Borrowed(s.trim_end()),
    |s| Cow::Borrowed(s.trim()),
    normalise,
];

/// A file's lines, numbered per rung (each rung's numbering made when first needed).
pub struct Haystack<'a> {
    lines: &'a [&'a str],
    rungs: [Option<Numbered<'a>>; 4],
}

/// One rung's numbering: the number of every line of the file, and the number of each
/// distinct line.
struct Numbered<'a> {
    ids: Vec<u32>,
    table: HashMap<Cow<'a, str>, u32>,
}

impl<'a> Haystack<'a> {
    /// The lines of a file (each without its line ending).
    pub fn new(lines: &'a [&'a str]) -> Self {
        Haystack {
            lines,
            rungs: [None, None, None, None],
        }
    }

    /// The first index `>= start` where `pattern` matches (see the module header for the
    /// ladder). An empty pattern matches at `start`. An end-of-file pattern only matches as
    /// the file's last lines.
    pub fn seek(
        &mut self,
        pattern: &[String],
        start: usize,
        end_of_file: bool,
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<usize>, Stopped> {
        if pattern.is_empty() {
            return Ok(Some(start));
        }
        let n = self.lines.len();
        if pattern.len() > n {
            return Ok(None);
        }
        let last = n - pattern.len();
        let from = if end_of_file { last } else { start };
        if from > last {
            return Ok(None);
        }
        let coarsest = RUNGS.len() - 1;
        let Some(first) = self.find(coarsest, pattern, from, stop)? else {
            return Ok(None);
        };
        for rung in 0..coarsest {
            if let Some(at) = self.find(rung, pattern, first, stop)? {
                return Ok(Some(at));
            }
        }
        Ok(Some(first))
    }

    /// The first index `>= from` where `pattern` matches under `rung`.
    fn find(
        &mut self,
        rung: usize,
        pattern: &[String],
        from: usize,
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<usize>, Stopped> {
        let numbered = self.numbered(rung, stop)?;
        let see = RUNGS[rung];
        let mut want = Vec::with_capacity(pattern.len());
        for line in pattern {
            match numbered.table.get(see(line).as_ref()) {
                Some(&id) => want.push(id),
                // A line the file does not hold under this rung: no match.
                None => return Ok(None),
            }
        }
        kmp(&numbered.ids, &want, from, stop)
    }

    fn numbered(&mut self, rung: usize, stop: &dyn Fn() -> bool) -> Result<&Numbered<'a>, Stopped> {
        if self.rungs[rung].is_none() {
            let see = RUNGS[rung];
            let mut table: HashMap<Cow<'a, str>, u32> = HashMap::new();
            let mut ids = Vec::with_capacity(self.lines.len());
            for (i, line) in self.lines.iter().enumerate() {
                if i % STOP_EVERY == STOP_EVERY - 1 && stop() {
                    return Err(Stopped);
                }
                let next = u32::try_from(table.len()).unwrap_or(u32::MAX);
                ids.push(*table.entry(see(line)).or_insert(next));
            }
            self.rungs[rung] = Some(Numbered { ids, table });
        }
        match &self.rungs[rung] {
            Some(numbered) => Ok(numbered),
            None => Err(Stopped),
        }
    }
}

/// The first index `>= from` where `want` occurs in `ids` (Knuth–Morris–Pratt: at most
/// `2 × (ids.len() − from) + want.len()` steps). `want` is not empty.
fn kmp(
    ids: &[u32],
    want: &[u32],
    from: usize,
    stop: &dyn Fn() -> bool,
) -> Result<Option<usize>, Stopped> {
    // fail[j]: the length of the longest proper border of want[..=j].
    let mut fail = vec![0usize; want.len()];
    let mut k = 0;
    for j in 1..want.len() {
        while k > 0 && want[j] != want[k] {
            k = fail[k - 1];
        }
        if want[j] == want[k] {
            k += 1;
        }
        fail[j] = k;
    }
    let mut matched = 0;
    let mut steps = 0usize;
    for (i, &id) in ids.iter().enumerate().skip(from) {
        while matched > 0 && id != want[matched] {
            matched = fail[matched - 1];
            steps += 1;
        }
        if id == want[matched] {
            matched += 1;
            if matched == want.len() {
                return Ok(Some(i + 1 - want.len()));
            }
        }
        steps += 1;
        if steps >= STOP_EVERY {
            steps = 0;
            if stop() {
                return Err(Stopped);
            }
        }
    }
    Ok(None)
}

/// `s` trimmed, with typographic dashes, quotes and spaces replaced by their ASCII forms
/// (borrowed when there are none: most lines of a file cost no allocation).
pub fn normalise(s: &str) -> Cow<'_, str> {
    let trimmed = s.trim();
    if trimmed.chars().all(|c| ascii_form(c) == c) {
        Cow::Borrowed(trimmed)
    } else {
        Cow::Owned(trimmed.chars().map(ascii_form).collect())
    }
}

/// The ASCII form of a typographic dash, quote or space; any other character itself.
fn ascii_form(c: char) -> char {
    match c {
        '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
        '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|s| s.to_string()).collect()
    }

    fn seek_sequence(
        lines: &[String],
        pattern: &[String],
        start: usize,
        end_of_file: bool,
    ) -> Option<usize> {
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        Haystack::new(&refs)
            .seek(pattern, start, end_of_file, &|| false)
            .unwrap()
    }

    /// The ladder as codex spells it: every rung, every position, in order.
    fn naive(lines: &[String], pattern: &[String], start: usize, eof: bool) -> Option<usize> {
        if pattern.is_empty() {
            return Some(start);
        }
        if pattern.len() > lines.len() {
            return None;
        }
        let last = lines.len() - pattern.len();
        let from = if eof { last } else { start };
        for rung in RUNGS {
            let found = (from..=last).find(|&i| {
                lines[i..i + pattern.len()]
                    .iter()
                    .zip(pattern)
                    .all(|(l, p)| rung(l) == rung(p))
            });
            if found.is_some() {
                return found;
            }
        }
        None
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

    /// Small files and hunks over a tiny alphabet (many partial matches, every rung): the
    /// linear search finds what the ladder tried position by position finds.
    #[test]
    fn agrees_with_the_ladder_position_by_position() {
        let alphabet = ["a", "a ", " a", "b", "\u{2014}", "-", ""];
        let mut seed = 0x2545_f491_u64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for _ in 0..3000 {
            let file: Vec<String> = (0..next(12))
                .map(|_| alphabet[next(alphabet.len())].to_string())
                .collect();
            let pattern: Vec<String> = (0..next(4))
                .map(|_| alphabet[next(alphabet.len())].to_string())
                .collect();
            let start = next(file.len() + 2);
            let eof = next(4) == 0;
            assert_eq!(
                seek_sequence(&file, &pattern, start, eof),
                naive(&file, &pattern, start, eof),
                "{file:?} {pattern:?} {start} {eof}"
            );
        }
    }

    /// A hunk whose every line the file holds, that matches thousands of lines at every
    /// position and then fails, against a file of a million lines: linear, so over at once
    /// (tried position by position it costs thousands of comparisons at each position).
    #[test]
    fn a_long_almost_matching_hunk_is_linear() {
        let mut file: Vec<&str> = vec!["b"];
        file.extend(std::iter::repeat_n("a", 1_000_000));
        let mut pattern = vec!["a".to_string(); 5_000];
        pattern.push("b".to_string());
        let started = std::time::Instant::now();
        let mut hay = Haystack::new(&file);
        assert_eq!(hay.seek(&pattern, 0, false, &|| false), Ok(None));
        pattern.pop();
        pattern.push("a ".to_string());
        assert_eq!(hay.seek(&pattern, 7, false, &|| false), Ok(Some(7)));
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_stop_ends_a_long_search() {
        let file: Vec<&str> = vec!["a"; 3 * STOP_EVERY];
        let pattern = v(&["a", "b"]);
        let mut file_with_b = file.clone();
        file_with_b.push("b");
        let mut hay = Haystack::new(&file_with_b);
        assert_eq!(hay.seek(&pattern, 0, false, &|| true), Err(Stopped));
        assert_eq!(
            hay.seek(&pattern, 0, false, &|| false),
            Ok(Some(3 * STOP_EVERY - 1))
        );
    }
}
