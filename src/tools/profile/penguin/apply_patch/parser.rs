//! The patch grammar of apply_patch (codex's apply-patch format): `*** Begin Patch` /
//! `*** End Patch` around `*** Add File:`, `*** Delete File:` and `*** Update File:` sections
//! (an update with an optional `*** Move to:` and `@@` hunks, each with an optional context
//! header and an optional `*** End of File`). Markers may be padded with whitespace, and the
//! whole patch may be wrapped in a `<<EOF` … `EOF` heredoc.
//!
//! It only turns text into [`FileOp`]s: it never looks at the file system.

/// `*** Begin Patch`.
pub const BEGIN_PATCH: &str = "*** Begin Patch";
/// `*** End Patch`.
pub const END_PATCH: &str = "*** End Patch";
const ADD_FILE: &str = "*** Add File: ";
const DELETE_FILE: &str = "*** Delete File: ";
const UPDATE_FILE: &str = "*** Update File: ";
const MOVE_TO: &str = "*** Move to: ";
const END_OF_FILE: &str = "*** End of File";

/// Why a patch text is not a patch (the texts are codex's).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The patch's envelope is wrong (the text says how).
    #[error("invalid patch: {0}")]
    InvalidPatch(String),
    /// A hunk does not parse (`line`: 1-based patch line).
    #[error("invalid hunk at line {line}, {message}")]
    InvalidHunk {
        /// What is wrong with the hunk.
        message: String,
        /// The 1-based line of the patch.
        line: usize,
    },
}

/// One hunk of an update: the lines it expects (`old`) and what replaces them (`new`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The `@@ <context>` header: a line to find (forward) before the hunk's lines.
    pub context: Option<String>,
    /// The lines to find (context and removed).
    pub old: Vec<String>,
    /// The lines they become (context and added).
    pub new: Vec<String>,
    /// For each line of `new`, the index in `old` of the same context line (`None`: an added
    /// line). A context line keeps its line ending in the file; an added one takes its
    /// neighbours'.
    pub origin: Vec<Option<usize>>,
    /// `*** End of File`: the hunk's lines end the file.
    pub end_of_file: bool,
    /// 1-based line of the patch where the hunk starts.
    pub line: usize,
}

/// What one section of a patch does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOp {
    /// `*** Add File`: a new file.
    Add {
        /// The path as written.
        path: String,
        /// The file's contents.
        contents: String,
    },
    /// `*** Delete File`.
    Delete {
        /// The path as written.
        path: String,
    },
    /// `*** Update File`: hunks, and maybe a move.
    Update {
        /// The path as written.
        path: String,
        /// `*** Move to`: the new path, if any.
        move_to: Option<String>,
        /// The hunks, in file order.
        chunks: Vec<Chunk>,
    },
}

impl FileOp {
    /// The path the section names (its source for a move).
    pub fn path(&self) -> &str {
        match self {
            FileOp::Add { path, .. } | FileOp::Delete { path } | FileOp::Update { path, .. } => {
                path
            }
        }
    }
}

/// A section and the 1-based patch line of its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// What the section does.
    pub op: FileOp,
    /// The 1-based patch line of its header.
    pub line: usize,
}

/// Parses a whole patch. An empty patch (no section) parses; applying it is the error.
pub fn parse_patch(text: &str) -> Result<Vec<Section>, ParseError> {
    let lines: Vec<&str> = text.trim().lines().collect();
    let body = match check_boundaries(&lines) {
        Ok(body) => body,
        Err(strict) => match strip_heredoc(&lines) {
            Some(inner) => check_boundaries(inner)?,
            None => return Err(strict),
        },
    };
    let mut sections = Vec::new();
    let mut i = 0;
    while i < body.len() {
        // Line numbers are 1-based and count `*** Begin Patch` as line 1.
        let (section, used) = parse_section(&body[i..], i + 2)?;
        sections.push(section);
        i += used;
    }
    Ok(sections)
}

/// The lines between the markers, when the first and last (trimmed) lines are the markers.
fn check_boundaries<'a>(lines: &'a [&'a str]) -> Result<&'a [&'a str], ParseError> {
    let first = lines.first().map(|l| l.trim());
    let last = lines.last().map(|l| l.trim());
    if first != Some(BEGIN_PATCH) {
        return Err(ParseError::InvalidPatch(
            "The first line of the patch must be '*** Begin Patch'".to_string(),
        ));
    }
    if lines.len() < 2 || last != Some(END_PATCH) {
        return Err(ParseError::InvalidPatch(
            "The last line of the patch must be '*** End Patch'".to_string(),
        ));
    }
    Ok(&lines[1..lines.len() - 1])
}

/// The inside of `<<EOF` / `<<'EOF'` / `<<"EOF"` … `EOF`.
fn strip_heredoc<'a>(lines: &'a [&'a str]) -> Option<&'a [&'a str]> {
    let first = lines.first()?.trim();
    let last = lines.last()?.trim();
    let opens = matches!(first, "<<EOF" | "<<'EOF'" | "<<\"EOF\"");
    (opens && last.ends_with("EOF") && lines.len() >= 4).then(|| &lines[1..lines.len() - 1])
}

/// One section starting at `lines[0]` (patch line `line`): the section and how many lines it used.
fn parse_section(lines: &[&str], line: usize) -> Result<(Section, usize), ParseError> {
    let header = lines.first().map_or("", |l| l.trim());
    if let Some(path) = header.strip_prefix(ADD_FILE) {
        let path = nonempty_path(path, line)?;
        let mut contents = String::new();
        let mut used = 1;
        for l in &lines[1..] {
            let Some(added) = l.strip_prefix('+') else {
                break;
            };
            contents.push_str(added);
            contents.push('\n');
            used += 1;
        }
        let op = FileOp::Add { path, contents };
        return Ok((Section { op, line }, used));
    }
    if let Some(path) = header.strip_prefix(DELETE_FILE) {
        let path = nonempty_path(path, line)?;
        return Ok((
            Section {
                op: FileOp::Delete { path },
                line,
            },
            1,
        ));
    }
    if let Some(path) = header.strip_prefix(UPDATE_FILE) {
        let path = nonempty_path(path, line)?;
        let mut used = 1;
        let mut move_to = None;
        if let Some(dest) = lines.get(1).and_then(|l| l.trim().strip_prefix(MOVE_TO)) {
            move_to = Some(nonempty_path(dest, line + 1)?);
            used += 1;
        }
        let mut chunks = Vec::new();
        while used < lines.len() {
            let next = lines[used];
            if next.trim().is_empty() {
                // Blank lines between hunks.
                used += 1;
                continue;
            }
            if next.trim_start().starts_with("***") {
                break;
            }
            let (chunk, n) = parse_chunk(&lines[used..], line + used, chunks.is_empty())?;
            chunks.push(chunk);
            used += n;
        }
        if chunks.is_empty() {
            return Err(ParseError::InvalidHunk {
                message: format!("Update file hunk for path '{path}' is empty"),
                line,
            });
        }
        let op = FileOp::Update {
            path,
            move_to,
            chunks,
        };
        return Ok((Section { op, line }, used));
    }
    Err(ParseError::InvalidHunk {
        message: format!(
            "'{header}' is not a valid hunk header. Valid hunk headers: '*** Add File: {{path}}', '*** Delete File: {{path}}', '*** Update File: {{path}}'"
        ),
        line,
    })
}

fn nonempty_path(path: &str, line: usize) -> Result<String, ParseError> {
    let path = path.trim();
    if path.is_empty() {
        return Err(ParseError::InvalidHunk {
            message: "the file header names no path".to_string(),
            line,
        });
    }
    Ok(path.to_string())
}

/// One `@@` hunk at `lines[0]` (patch line `line`). The first hunk of a file may omit `@@`.
fn parse_chunk(
    lines: &[&str],
    line: usize,
    allow_missing_context: bool,
) -> Result<(Chunk, usize), ParseError> {
    let head = lines.first().copied().unwrap_or("");
    let (context, start) = if head.trim_end() == "@@" {
        (None, 1)
    } else if let Some(ctx) = head.strip_prefix("@@ ") {
        (Some(ctx.to_string()), 1)
    } else if allow_missing_context {
        (None, 0)
    } else {
        return Err(ParseError::InvalidHunk {
            message: format!(
                "Expected update hunk to start with a @@ context marker, got: '{head}'"
            ),
            line,
        });
    };
    if start >= lines.len() {
        return Err(ParseError::InvalidHunk {
            message: "Update hunk does not contain any lines".to_string(),
            line: line + 1,
        });
    }
    let mut chunk = Chunk {
        context,
        old: Vec::new(),
        new: Vec::new(),
        origin: Vec::new(),
        end_of_file: false,
        line,
    };
    let mut parsed = 0;
    for l in &lines[start..] {
        if l.trim() == END_OF_FILE {
            if parsed == 0 {
                return Err(ParseError::InvalidHunk {
                    message: "Update hunk does not contain any lines".to_string(),
                    line: line + 1,
                });
            }
            chunk.end_of_file = true;
            parsed += 1;
            break;
        }
        match l.chars().next() {
            None => {
                chunk.origin.push(Some(chunk.old.len()));
                chunk.old.push(String::new());
                chunk.new.push(String::new());
            }
            Some(' ') => {
                chunk.origin.push(Some(chunk.old.len()));
                chunk.old.push(l[1..].to_string());
                chunk.new.push(l[1..].to_string());
            }
            Some('+') => {
                chunk.origin.push(None);
                chunk.new.push(l[1..].to_string());
            }
            Some('-') => chunk.old.push(l[1..].to_string()),
            Some(_) if parsed == 0 => {
                return Err(ParseError::InvalidHunk {
                    message: format!(
                        "Unexpected line found in update hunk: '{l}'. Every line should start with ' ' (context line), '+' (added line), or '-' (removed line)"
                    ),
                    line: line + start,
                });
            }
            // The start of the next hunk or section.
            Some(_) => break,
        }
        parsed += 1;
    }
    Ok((chunk, start + parsed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(text: &str) -> Vec<FileOp> {
        parse_patch(text)
            .unwrap()
            .into_iter()
            .map(|s| s.op)
            .collect()
    }

    #[test]
    fn every_section_kind() {
        let got = ops(
            "*** Begin Patch\n*** Add File: a.txt\n+one\n+two\n*** Delete File: b.txt\n*** Update File: c.txt\n*** Move to: d/c.txt\n@@ fn main\n ctx\n-old\n+new\n@@\n-x\n+y\n*** End of File\n*** End Patch\n",
        );
        assert_eq!(
            got[0],
            FileOp::Add {
                path: "a.txt".into(),
                contents: "one\ntwo\n".into()
            }
        );
        assert_eq!(
            got[1],
            FileOp::Delete {
                path: "b.txt".into()
            }
        );
        let FileOp::Update {
            path,
            move_to,
            chunks,
        } = &got[2]
        else {
            panic!("{got:?}")
        };
        assert_eq!(
            (path.as_str(), move_to.as_deref()),
            ("c.txt", Some("d/c.txt"))
        );
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0].context.as_deref(), Some("fn main"));
        assert_eq!(chunks[0].old, vec!["ctx", "old"]);
        assert_eq!(chunks[0].new, vec!["ctx", "new"]);
        assert_eq!(chunks[0].origin, vec![Some(0), None]);
        assert_eq!(chunks[0].line, 8);
        assert!(!chunks[0].end_of_file && chunks[1].end_of_file);
    }

    #[test]
    fn padded_markers_and_heredoc() {
        let padded = " *** Begin Patch \n  *** Update File: f\n@@\n-a\n+b\n *** End Patch";
        assert_eq!(ops(padded).len(), 1);
        let heredoc = "<<'EOF'\n*** Begin Patch\n*** Delete File: f\n*** End Patch\nEOF\n";
        assert_eq!(ops(heredoc), vec![FileOp::Delete { path: "f".into() }]);
        assert!(ops("*** Begin Patch\n*** End Patch").is_empty());
    }

    #[test]
    fn first_hunk_may_omit_the_marker() {
        let got = ops("*** Begin Patch\n*** Update File: f\n-a\n+b\n*** End Patch");
        let FileOp::Update { chunks, .. } = &got[0] else {
            panic!()
        };
        assert_eq!(
            (chunks[0].old.clone(), chunks[0].new.clone()),
            (vec!["a".to_string()], vec!["b".to_string()])
        );
    }

    #[test]
    fn codex_error_texts() {
        let err = |t: &str| parse_patch(t).unwrap_err().to_string();
        assert_eq!(
            err("*** Update File: f"),
            "invalid patch: The first line of the patch must be '*** Begin Patch'"
        );
        assert_eq!(
            err("*** Begin Patch\n*** Delete File: f"),
            "invalid patch: The last line of the patch must be '*** End Patch'"
        );
        assert_eq!(
            err("*** Begin Patch\n*** Frobnicate File: foo\n*** End Patch"),
            "invalid hunk at line 2, '*** Frobnicate File: foo' is not a valid hunk header. Valid hunk headers: '*** Add File: {path}', '*** Delete File: {path}', '*** Update File: {path}'"
        );
        assert_eq!(
            err("*** Begin Patch\n*** Update File: foo.txt\n*** End Patch"),
            "invalid hunk at line 2, Update file hunk for path 'foo.txt' is empty"
        );
        let unexpected = err("*** Begin Patch\n*** Update File: f\n@@\n-a\n@@\nbad\n*** End Patch");
        assert!(
            unexpected
                .starts_with("invalid hunk at line 6, Unexpected line found in update hunk: 'bad'"),
            "{unexpected}"
        );
        let no_marker = err("*** Begin Patch\n*** Update File: f\n@@\n-a\n\nzzz\n*** End Patch");
        assert!(
            no_marker
                .contains("Expected update hunk to start with a @@ context marker, got: 'zzz'"),
            "{no_marker}"
        );
    }
}
