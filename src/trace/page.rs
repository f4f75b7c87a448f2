//! A session's conversation read from its trace a page at a time: the `model_msg` records
//! (prompts, answers, tool calls and outputs, …) of all its files in order, with each
//! subagent's own conversation read from the child's trace where the parent's `subagent`
//! record points at it, tagged with the child's id as `origin`.
//!
//! A page reads its files line by line from a [`Position`] (file number and byte offset, one
//! per nesting level), never a whole trace, and stops after `limit` messages or
//! [`PAGE_BYTES`]. A stored session (`--store`) is read the same way from a [`RecordSource`]
//! ([`read_stored_page`], a [`StoredPosition`] of sequence numbers), [`SOURCE_PAGE`] records
//! at a time per level, so both backends give the same pages. It only reads traces; it never
//! writes one, never starts a session and trusts no position: one that is not at a record's
//! start in the session's own files, or whose nesting does not start at a `subagent` record,
//! is [`PageError::BadPosition`].

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::message::{EventPayload, OmniMessage, Payload};
use crate::trace::paths::{locate_trace, trace_file_name};
use crate::trace::record_source::{RecordSource, SOURCE_PAGE, SourceError};
use crate::trace::rotation::split_name;

/// Bytes of message JSON a page holds at most (a page has at least one message).
pub const PAGE_BYTES: usize = 8 * 1024 * 1024;
/// Subagent levels followed at most (deeper pointers are skipped).
pub const MAX_DEPTH: usize = 8;

/// Failures of a page read.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// The position does not point at a record of this session's history.
    #[error("the cursor does not point into this session's messages ({0})")]
    BadPosition(&'static str),
    /// The store's records cannot be read.
    #[error("cannot read the stored trace: {0}")]
    Source(#[from] SourceError),
    /// A trace file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Where one nesting level stands: the 1-based number of a file among its session's files
/// and a byte offset in it (a record's first byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spot {
    /// 1-based file number among the session's files.
    pub file: u32,
    /// Byte offset of a record's first byte (or the file's end).
    pub offset: u64,
}

/// Where a page starts: the session's own spot, then one spot per subagent being read (each
/// outer spot then points at the `subagent` record of the next level).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position(pub Vec<Spot>);

impl Position {
    /// The start of the history.
    pub fn start() -> Self {
        Position(vec![Spot { file: 1, offset: 0 }])
    }
}

/// One page of messages; `P` is where a page starts ([`Position`] in trace files,
/// [`StoredPosition`] in a store).
#[derive(Debug)]
pub struct Page<P = Position> {
    /// The messages, oldest first, each as its JSON line.
    pub messages: Vec<String>,
    /// Where the next page starts; `None` when the history ended.
    pub next: Option<P>,
}

/// The trace files of the session whose latest file is `latest`, oldest first.
pub fn files_from_latest(latest: &Path) -> Vec<PathBuf> {
    let Some((id, last)) = latest
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(split_name)
    else {
        return vec![latest.to_path_buf()];
    };
    (1..=last)
        .filter_map(|i| u32::try_from(i).ok())
        .map(|i| latest.with_file_name(trace_file_name(id, i)))
        .collect()
}

/// How the records of one session's history are read, one at a time, from a place in it.
trait History {
    /// A place in the history: before a record, or at its end.
    type At: Copy;
    /// Whether `at` may be a place in this history (checked before any read from it).
    fn admits(&self, at: Self::At) -> bool;
    /// The record at `at` (its JSON line) and the place after it; `None` at the end.
    fn next_line(&mut self, at: Self::At) -> Result<Option<(String, Self::At)>, PageError>;
}

/// A session's trace files.
struct FileHistory {
    files: Vec<PathBuf>,
    /// The open file and where its next read starts.
    reader: Option<(Spot, BufReader<File>)>,
}

impl History for FileHistory {
    type At = Spot;

    fn admits(&self, at: Spot) -> bool {
        at.file != 0 && at.file as usize <= self.files.len().max(1)
    }

    fn next_line(&mut self, mut at: Spot) -> Result<Option<(String, Spot)>, PageError> {
        loop {
            let index = at.file as usize;
            let Some(path) = index.checked_sub(1).and_then(|i| self.files.get(i)) else {
                return Ok(None);
            };
            if !matches!(&self.reader, Some((spot, _)) if *spot == at) {
                self.reader = Some((at, open_at(path, at.offset)?));
            }
            let Some((spot, reader)) = self.reader.as_mut() else {
                return Ok(None);
            };
            let mut bytes = Vec::new();
            let read = reader
                .read_until(b'\n', &mut bytes)
                .map_err(|source| PageError::Read {
                    path: path.clone(),
                    source,
                })? as u64;
            if read == 0 {
                self.reader = None;
                if index == self.files.len() {
                    return Ok(None);
                }
                at = Spot {
                    file: at.file + 1,
                    offset: 0,
                };
                continue;
            }
            let after = Spot {
                file: at.file,
                offset: at.offset + read,
            };
            if bytes.last() != Some(&b'\n') && index == self.files.len() {
                // A last line still being written: not a record yet.
                self.reader = None;
                return Ok(None);
            }
            *spot = after;
            return Ok(Some((String::from_utf8_lossy(&bytes).into_owned(), after)));
        }
    }
}

/// A session's records in a [`RecordSource`], read [`SOURCE_PAGE`] at a time; a place is the
/// sequence number of the record before it (`-1`: the start).
struct StoredHistory<'a> {
    source: &'a dyn RecordSource,
    id: String,
    /// Records read ahead, and the sequence number they follow.
    ahead: VecDeque<(i64, Vec<u8>)>,
    ahead_after: i64,
}

impl<'a> StoredHistory<'a> {
    /// Session `id`'s history; `None` when it has no record.
    fn open(source: &'a dyn RecordSource, id: &str) -> Result<Option<Self>, PageError> {
        let mut history = StoredHistory {
            source,
            id: id.to_string(),
            ahead: VecDeque::new(),
            ahead_after: -1,
        };
        history.fill(-1)?;
        Ok((!history.ahead.is_empty()).then_some(history))
    }

    fn fill(&mut self, after: i64) -> Result<(), PageError> {
        self.ahead = self
            .source
            .records_after(&self.id, after, SOURCE_PAGE)?
            .into();
        self.ahead_after = after;
        Ok(())
    }
}

impl History for StoredHistory<'_> {
    type At = i64;

    fn admits(&self, at: i64) -> bool {
        at >= -1
    }

    fn next_line(&mut self, at: i64) -> Result<Option<(String, i64)>, PageError> {
        if self.ahead_after != at || self.ahead.is_empty() {
            self.fill(at)?;
        }
        let Some((seq, bytes)) = self.ahead.pop_front() else {
            return Ok(None);
        };
        self.ahead_after = seq;
        Ok(Some((String::from_utf8_lossy(&bytes).into_owned(), seq)))
    }
}

/// One level being read.
struct Level<H: History> {
    history: H,
    origin: Vec<String>,
    /// The next record to read (while a child is read: its `subagent` record).
    at: H::At,
    /// While a child is read: the place after its `subagent` record, where this level goes on.
    resume: Option<H::At>,
}

impl<H: History> Level<H> {
    fn next_line(&mut self) -> Result<Option<(String, H::At)>, PageError> {
        self.history.next_line(self.at)
    }
}

/// `path` opened at `offset`, which must start a line (or be the file's end).
fn open_at(path: &Path, offset: u64) -> Result<BufReader<File>, PageError> {
    let read_err = |source| PageError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(read_err)?;
    let len = file.metadata().map_err(read_err)?.len();
    if offset > len {
        return Err(PageError::BadPosition("beyond the end of a file"));
    }
    if offset > 0 {
        file.seek(SeekFrom::Start(offset - 1)).map_err(read_err)?;
        let mut before = [0u8; 1];
        std::io::Read::read_exact(&mut file, &mut before).map_err(read_err)?;
        if before[0] != b'\n' {
            return Err(PageError::BadPosition("not at the start of a record"));
        }
    }
    Ok(BufReader::new(file))
}

/// The id of the child a `subagent` record points at.
fn pointer(msg: &OmniMessage) -> Option<&str> {
    match &msg.payload {
        Payload::Event(EventPayload::Subagent { session_id }) => Some(session_id),
        _ => None,
    }
}

/// The files of the recorded session `id` under `home` (none when it has no trace).
fn session_files(home: &Path, id: &str) -> Vec<PathBuf> {
    locate_trace(home, id)
        .map(|latest| files_from_latest(&latest))
        .unwrap_or_default()
}

/// Reads at most `limit` messages of the session whose files are `files` (oldest first),
/// from `from`. Subagents' traces are looked up under `home`.
pub fn read_page(
    home: &Path,
    files: Vec<PathBuf>,
    from: &Position,
    limit: usize,
) -> Result<Page, PageError> {
    let root = FileHistory {
        files,
        reader: None,
    };
    let open = |child: &str| {
        let files = session_files(home, child);
        Ok((!files.is_empty()).then_some(FileHistory {
            files,
            reader: None,
        }))
    };
    let start = Spot { file: 1, offset: 0 };
    let (messages, next) = read_levels(root, &from.0, start, open, limit)?;
    Ok(Page {
        messages,
        next: next.map(Position),
    })
}

/// Where a page of a stored session starts: per nesting level (the session's own first, then
/// one per subagent being read), the sequence number of the record before it (`-1`: the
/// start); each outer place is then before the `subagent` record of the next level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPosition(pub Vec<i64>);

impl StoredPosition {
    /// The start of the history.
    pub fn start() -> Self {
        StoredPosition(vec![-1])
    }
}

/// [`read_page`] for session `id` in a store: the same messages, pages and nesting, its own
/// and its subagents' records read from `source` (a subagent's under its own session id).
pub fn read_stored_page(
    source: &dyn RecordSource,
    id: &str,
    from: &StoredPosition,
    limit: usize,
) -> Result<Page<StoredPosition>, PageError> {
    let root = StoredHistory {
        source,
        id: id.to_string(),
        ahead: VecDeque::new(),
        ahead_after: -1,
    };
    let open = |child: &str| StoredHistory::open(source, child);
    let (messages, next) = read_levels(root, &from.0, -1, open, limit)?;
    Ok(Page {
        messages,
        next: next.map(StoredPosition),
    })
}

/// The page read of both backends: at most `limit` messages of the history `root` from the
/// places `from` (one per nesting level), each child opened by `open` (`None`: it has no
/// history, its pointer is skipped); also the places the next page starts from.
#[allow(clippy::type_complexity)]
fn read_levels<H: History>(
    root: H,
    from: &[H::At],
    start: H::At,
    mut open: impl FnMut(&str) -> Result<Option<H>, PageError>,
    limit: usize,
) -> Result<(Vec<String>, Option<Vec<H::At>>), PageError> {
    let Some((first, nested)) = from.split_first() else {
        return Err(PageError::BadPosition("empty"));
    };
    if nested.len() >= MAX_DEPTH {
        return Err(PageError::BadPosition("nested too deep"));
    }
    if !root.admits(*first) {
        return Err(PageError::BadPosition("no such file"));
    }
    let mut stack = vec![Level {
        history: root,
        origin: Vec::new(),
        at: *first,
        resume: None,
    }];
    // Back into the subagents the position was reading.
    for spot in nested {
        let Some(top) = stack.last_mut() else { break };
        let Some((line, after)) = top.next_line()? else {
            return Err(PageError::BadPosition("no subagent record there"));
        };
        top.resume = Some(after);
        let child = OmniMessage::from_json(line.trim_end())
            .ok()
            .and_then(|m| pointer(&m).map(str::to_string))
            .ok_or(PageError::BadPosition("no subagent record there"))?;
        let history = open(&child)?
            .filter(|h| h.admits(*spot))
            .ok_or(PageError::BadPosition("no such subagent file"))?;
        let mut origin = top.origin.clone();
        origin.push(child);
        stack.push(Level {
            history,
            origin,
            at: *spot,
            resume: None,
        });
    }
    let mut messages = Vec::new();
    let mut bytes = 0usize;
    loop {
        let depth = stack.len();
        let Some(top) = stack.last_mut() else { break };
        if messages.len() >= limit.max(1) || bytes >= PAGE_BYTES {
            let next = stack.iter().map(|l| l.at).collect();
            return Ok((messages, Some(next)));
        }
        let Some((line, after)) = top.next_line()? else {
            // This level ended: its parent goes on after the `subagent` record.
            stack.pop();
            if let Some(parent) = stack.last_mut()
                && let Some(after) = parent.resume.take()
            {
                parent.at = after;
            }
            continue;
        };
        let Ok(mut msg) = OmniMessage::from_json(line.trim_end()) else {
            // A malformed line is skipped, as every trace reader does.
            top.at = after;
            continue;
        };
        if let Some(child) = pointer(&msg) {
            let history = if depth < MAX_DEPTH {
                open(child)?
            } else {
                None
            };
            if let Some(history) = history {
                let mut origin = top.origin.clone();
                origin.push(child.to_string());
                // The parent stays at the pointer until the child's history is read.
                top.resume = Some(after);
                stack.push(Level {
                    history,
                    origin,
                    at: start,
                    resume: None,
                });
            } else {
                top.at = after;
            }
            continue;
        }
        top.at = after;
        if !matches!(msg.payload, Payload::Model(_)) {
            continue;
        }
        if !top.origin.is_empty() {
            msg.origin = Some(top.origin.clone());
        }
        let json = msg.to_json();
        bytes += json.len();
        messages.push(json);
    }
    Ok((messages, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{SessionMeta, build};

    fn line(msg: &OmniMessage) -> String {
        format!("{}\n", msg.to_json())
    }

    fn texts<P>(page: &Page<P>) -> Vec<String> {
        page.messages
            .iter()
            .map(|j| {
                let v: serde_json::Value = serde_json::from_str(j).unwrap();
                let origin = v["origin"].as_array().map(|o| o.len()).unwrap_or(0);
                format!(
                    "{}{}",
                    v["payload"]["text"].as_str().unwrap(),
                    "'".repeat(origin)
                )
            })
            .collect()
    }

    #[test]
    fn pages_follow_files_and_subagents_in_order() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("traces").join("2026-01-01");
        std::fs::create_dir_all(&dir).unwrap();
        let meta = line(&OmniMessage::session_meta(SessionMeta::default()));
        let text = |t: &str| line(&build::user_text(t.to_string(), None));
        let ptr = line(&OmniMessage::event(EventPayload::Subagent {
            session_id: "kid".into(),
        }));
        std::fs::write(
            dir.join("p_001.jsonl"),
            format!("{meta}{}{ptr}{}", text("a"), text("b")),
        )
        .unwrap();
        std::fs::write(dir.join("p_002.jsonl"), format!("{meta}{}", text("c"))).unwrap();
        std::fs::write(
            dir.join("kid_001.jsonl"),
            format!("{meta}{}{}", text("k1"), text("k2")),
        )
        .unwrap();
        let files = files_from_latest(&dir.join("p_002.jsonl"));
        let mut all = Vec::new();
        let mut at = Position::start();
        let mut pages = 0;
        loop {
            let page = read_page(home.path(), files.clone(), &at, 2).unwrap();
            all.extend(texts(&page));
            pages += 1;
            match page.next {
                Some(next) => at = next,
                None => break,
            }
        }
        assert_eq!(all, ["a", "k1'", "k2'", "b", "c"]);
        assert!(pages >= 3);
        // A spot inside a record is refused.
        let bad = Position(vec![Spot { file: 1, offset: 3 }]);
        assert!(matches!(
            read_page(home.path(), files.clone(), &bad, 2),
            Err(PageError::BadPosition(_))
        ));
        // A nested spot whose parent spot is no subagent record is refused.
        let bad = Position(vec![
            Spot { file: 1, offset: 0 },
            Spot { file: 1, offset: 0 },
        ]);
        assert!(matches!(
            read_page(home.path(), files, &bad, 2),
            Err(PageError::BadPosition(_))
        ));
    }

    /// Sessions' records in memory, by id.
    struct Memory(std::collections::HashMap<String, Vec<String>>);

    impl RecordSource for Memory {
        fn records_after(
            &self,
            id: &str,
            after: i64,
            limit: usize,
        ) -> Result<Vec<(i64, Vec<u8>)>, SourceError> {
            Ok(self
                .0
                .get(id)
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, r)| (i as i64 * 10, r.clone().into_bytes()))
                .filter(|(seq, _)| *seq > after)
                .take(limit)
                .collect())
        }
    }

    #[test]
    fn stored_pages_follow_subagents_like_files() {
        let meta = line(&OmniMessage::session_meta(SessionMeta::default()));
        let text = |t: &str| line(&build::user_text(t.to_string(), None));
        let ptr = line(&OmniMessage::event(EventPayload::Subagent {
            session_id: "kid".into(),
        }));
        let gone = line(&OmniMessage::event(EventPayload::Subagent {
            session_id: "gone".into(),
        }));
        let source = Memory(
            [
                (
                    "p".to_string(),
                    vec![meta.clone(), text("a"), ptr, gone, text("b"), text("c")],
                ),
                ("kid".to_string(), vec![meta, text("k1"), text("k2")]),
            ]
            .into(),
        );
        for limit in [1, 2, 3, 100] {
            let mut all = Vec::new();
            let mut at = StoredPosition::start();
            loop {
                let page = read_stored_page(&source, "p", &at, limit).unwrap();
                assert!(page.messages.len() <= limit);
                all.extend(texts(&page));
                match page.next {
                    Some(next) => at = next,
                    None => break,
                }
            }
            assert_eq!(all, ["a", "k1'", "k2'", "b", "c"], "limit {limit}");
        }
        // Inside the child after one message: the parent waits at its pointer.
        let page = read_stored_page(&source, "p", &StoredPosition::start(), 2).unwrap();
        assert_eq!(page.next, Some(StoredPosition(vec![10, 10])));
        // A nested place whose parent place is no subagent record is refused, as is a place
        // before the start.
        for bad in [vec![0, -1], vec![-2]] {
            assert!(matches!(
                read_stored_page(&source, "p", &StoredPosition(bad), 2),
                Err(PageError::BadPosition(_))
            ));
        }
        // A session with no record is an empty last page.
        let page = read_stored_page(&source, "none", &StoredPosition::start(), 2).unwrap();
        assert!(page.messages.is_empty() && page.next.is_none());
    }
}
