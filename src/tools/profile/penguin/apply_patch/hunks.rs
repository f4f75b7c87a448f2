//! A file's new text from its hunks: each hunk is found forward from the previous one (the
//! [`super::seek`] ladder; a `@@ <line>` header first), its lines replaced, and every line
//! written with its own line ending (codex's rules otherwise: a missing final newline is
//! added). It asks its `stop` between hunks and during long searches.
//!
//! Pure text in, text out: it never looks at the file system.

use super::parser::Chunk;
use super::seek::{Haystack, Stopped};

/// Why the hunks cannot be applied to a file's text (the texts are codex's).
#[derive(Debug, thiserror::Error)]
pub enum HunkError {
    /// The call was cancelled while the hunks were applied.
    #[error("stopped")]
    Stopped,
    /// A hunk's `@@ <context>` line is not found.
    #[error(
        "Failed to find context '{context}' in {path}\n(hunk {hunk} of {path}, at line {line} of the patch)"
    )]
    Context {
        /// The path as the patch wrote it.
        path: String,
        /// The context line looked for.
        context: String,
        /// The 1-based hunk of the file.
        hunk: usize,
        /// The 1-based line of the patch where the hunk starts.
        line: usize,
    },
    /// A hunk's old lines are not found.
    #[error(
        "Failed to find expected lines in {path}:\n{lines}\n(hunk {hunk} of {path}, at line {line} of the patch)"
    )]
    Lines {
        /// The path as the patch wrote it.
        path: String,
        /// The lines looked for.
        lines: String,
        /// The 1-based hunk of the file.
        hunk: usize,
        /// The 1-based line of the patch where the hunk starts.
        line: usize,
    },
}

/// The file's text after every hunk (codex's rules: a missing final newline is added).
///
/// Every line keeps its own ending (`\n` or `\r\n`; a hunk's lines are matched without it),
/// a context line of a hunk too. An added line takes the ending of the line above it in the
/// result (at the top of the file, the file's first ending), and so does a last line that had
/// none. `stop`: see the module header.
pub fn new_contents(
    shown: &str,
    text: &str,
    chunks: &[Chunk],
    stop: &dyn Fn() -> bool,
) -> Result<String, HunkError> {
    let (lines, endings) = split_lines(text);
    let mut hay = Haystack::new(&lines);
    let mut seek = |pattern: &[String], at: usize, end_of_file: bool| {
        hay.seek(pattern, at, end_of_file, stop)
            .map_err(|Stopped| HunkError::Stopped)
    };
    let mut replacements: Vec<Replacement<'_>> = Vec::new();
    let mut at = 0;
    for (i, chunk) in chunks.iter().enumerate() {
        if stop() {
            return Err(HunkError::Stopped);
        }
        if let Some(context) = &chunk.context {
            match seek(std::slice::from_ref(context), at, false)? {
                Some(idx) => at = idx + 1,
                None => {
                    return Err(HunkError::Context {
                        path: shown.to_string(),
                        context: context.clone(),
                        hunk: i + 1,
                        line: chunk.line,
                    });
                }
            }
        }
        if chunk.old.is_empty() {
            // A pure addition goes at the end of the file.
            replacements.push(Replacement {
                start: lines.len(),
                len: 0,
                new: &chunk.new,
                origin: &chunk.origin,
            });
            continue;
        }
        let mut old: &[String] = &chunk.old;
        let mut new: &[String] = &chunk.new;
        let mut found = seek(old, at, chunk.end_of_file)?;
        if found.is_none() && old.last().is_some_and(String::is_empty) {
            // A trailing empty line in the hunk stands for the final newline.
            old = &old[..old.len() - 1];
            if new.last().is_some_and(String::is_empty) {
                new = &new[..new.len() - 1];
            }
            found = seek(old, at, chunk.end_of_file)?;
        }
        // Never backwards (an end-of-file hunk is looked for at the end whatever came before).
        let Some(start) = found.filter(|&start| start >= at) else {
            return Err(HunkError::Lines {
                path: shown.to_string(),
                lines: chunk.old.join("\n"),
                hunk: i + 1,
                line: chunk.line,
            });
        };
        replacements.push(Replacement {
            start,
            len: old.len(),
            new,
            origin: &chunk.origin[..new.len().min(chunk.origin.len())],
        });
        at = start + old.len();
    }
    replacements.sort_by_key(|r| r.start);
    let mut out = Written {
        text: String::with_capacity(text.len() + text.len() / 8 + 64),
        above: None,
        first: endings
            .iter()
            .copied()
            .find(|e| !e.is_empty())
            .unwrap_or("\n"),
    };
    let mut next = 0;
    for r in &replacements {
        for k in next..r.start {
            out.push(lines[k], endings[k]);
        }
        for (j, line) in r.new.iter().enumerate() {
            let ending = match r.origin.get(j).copied().flatten() {
                Some(k) if k < r.len => endings[r.start + k],
                // Added: the ending of the line above.
                _ => "",
            };
            out.push(line, ending);
        }
        next = r.start + r.len;
    }
    for k in next..lines.len() {
        out.push(lines[k], endings[k]);
    }
    Ok(out.text)
}

/// One hunk's change: `len` lines from `start` become `new` (`origin`: see [`Chunk::origin`]).
struct Replacement<'c> {
    start: usize,
    len: usize,
    new: &'c [String],
    origin: &'c [Option<usize>],
}

/// The new text as it is written, line by line.
struct Written<'t> {
    text: String,
    /// The ending of the line written last.
    above: Option<&'t str>,
    /// The file's first line ending (`\n` for a file without one).
    first: &'t str,
}

impl<'t> Written<'t> {
    /// Writes `line` with `ending`; an empty one is the ending of the line above.
    fn push(&mut self, line: &str, ending: &'t str) {
        let ending = match ending {
            "" => self.above.unwrap_or(self.first),
            own => own,
        };
        self.text.push_str(line);
        self.text.push_str(ending);
        self.above = Some(ending);
    }
}

/// The lines of `text` without their endings, and each line's ending (`\n`, `\r\n`, or
/// empty for a last line without one).
fn split_lines(text: &str) -> (Vec<&str>, Vec<&str>) {
    let mut lines = Vec::new();
    let mut endings = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let Some(nl) = rest.find('\n') else {
            lines.push(rest);
            endings.push("");
            break;
        };
        let cut = if rest[..nl].ends_with('\r') {
            nl - 1
        } else {
            nl
        };
        lines.push(&rest[..cut]);
        endings.push(&rest[cut..=nl]);
        rest = &rest[nl + 1..];
    }
    (lines, endings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::profile::penguin::apply_patch::parser::{FileOp, parse_patch};

    fn apply(text: &str, patch: &str) -> Result<String, Box<dyn std::error::Error>> {
        let sections = parse_patch(patch)?;
        let FileOp::Update { chunks, .. } = &sections[0].op else {
            panic!("not an update")
        };
        Ok(new_contents("f.txt", text, chunks, &|| false)?)
    }

    #[test]
    fn hunks_apply_forward_and_keep_a_final_newline() {
        let p = "*** Begin Patch\n*** Update File: f.txt\n@@\n-b\n+B\n@@\n-d\n+D\n*** End Patch";
        assert_eq!(apply("a\nb\nc\nd", p).unwrap(), "a\nB\nc\nD\n");
        // Forward only: the second hunk cannot match before the first.
        let back = "*** Begin Patch\n*** Update File: f.txt\n@@\n-d\n+D\n@@\n-b\n+B\n*** End Patch";
        let err = apply("a\nb\nc\nd\n", back).unwrap_err().to_string();
        assert_eq!(
            err,
            "Failed to find expected lines in f.txt:\nb\n(hunk 2 of f.txt, at line 6 of the patch)"
        );
    }

    #[test]
    fn context_header_and_end_of_file() {
        let p = "*** Begin Patch\n*** Update File: f.txt\n@@ fn two\n-x\n+y\n*** End Patch";
        assert_eq!(
            apply("fn one\nx\nfn two\nx\n", p).unwrap(),
            "fn one\nx\nfn two\ny\n"
        );
        let eof =
            "*** Begin Patch\n*** Update File: f.txt\n@@\n-x\n+z\n*** End of File\n*** End Patch";
        assert_eq!(apply("x\nq\nx\n", eof).unwrap(), "x\nq\nz\n");
        let missing = "*** Begin Patch\n*** Update File: f.txt\n@@ nope\n-x\n+y\n*** End Patch";
        assert!(
            apply("x\n", missing)
                .unwrap_err()
                .to_string()
                .starts_with("Failed to find context 'nope' in f.txt")
        );
    }

    #[test]
    fn an_end_of_file_hunk_is_never_found_before_the_previous_hunk() {
        let p = "*** Begin Patch\n*** Update File: f.txt\n@@\n-a\n-b\n+c\n@@\n-b\n+B\n*** End of File\n*** End Patch";
        assert_eq!(
            apply("a\nb\n", p).unwrap_err().to_string(),
            "Failed to find expected lines in f.txt:\nb\n(hunk 2 of f.txt, at line 7 of the patch)"
        );
    }

    #[test]
    fn each_line_keeps_its_ending_and_added_lines_take_the_one_above() {
        let p = "*** Begin Patch\n*** Update File: f.txt\n@@\n a\n-b\n+B\n+B2\n c\n*** End Patch";
        // CRLF: the context lines keep theirs, the added ones take it.
        assert_eq!(
            apply("a\r\nb\r\nc\r\nd\r\n", p).unwrap(),
            "a\r\nB\r\nB2\r\nc\r\nd\r\n"
        );
        // Mixed: each kept line has its own; an added line the one above it.
        assert_eq!(apply("a\nb\r\nc\r\nd\n", p).unwrap(), "a\nB\nB2\nc\r\nd\n");
        // A missing final newline is the ending above; at the top, the file's first one.
        let top = "*** Begin Patch\n*** Update File: f.txt\n@@\n-x\n+w\n+x\n*** End Patch";
        assert_eq!(apply("x\r\ny", top).unwrap(), "w\r\nx\r\ny\r\n");
        let add = "*** Begin Patch\n*** Update File: f.txt\n@@\n+z\n*** End Patch";
        assert_eq!(apply("x\r\ny", add).unwrap(), "x\r\ny\r\nz\r\n");
        assert_eq!(apply("x\ny", add).unwrap(), "x\ny\nz\n");
    }

    #[test]
    fn pure_addition_appends() {
        let p = "*** Begin Patch\n*** Update File: f.txt\n@@\n+new\n*** End Patch";
        assert_eq!(apply("a\n", p).unwrap(), "a\nnew\n");
    }
}
