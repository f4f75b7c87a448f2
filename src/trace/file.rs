//! `TraceFile`: the one open handle on one trace file, and the append mechanics of the JSONL
//! format (one `writev(2)` per batch of whole records on an `O_APPEND` file, torn-tail healing,
//! and the owner's repair of a torn tail when it takes the lock).
//!
//! This module owns bytes on disk only. It must not serialize messages, decide what is
//! recorded, or be used by anyone but the `TraceActor` (which serializes all appends of a
//! session); it never panics on I/O failures, it returns them.

use std::fs::{File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::batch::write_parts;
use super::private::{PRIVATE_FILE_MODE, create_private_dir_all, is_shared};

/// How far back a torn tail's start is searched per read.
const TAIL_CHUNK: u64 = 64 * 1024;

/// The sole handle on one trace file, kept open for the life of the writer.
#[derive(Debug)]
pub struct TraceFile {
    file: File,
    path: PathBuf,
    /// The file may end in a partial line: the next record starts with `\n`.
    torn: bool,
    /// Bytes this handle has written (heal prefixes included).
    bytes_written: u64,
}

impl TraceFile {
    /// Opens (creating parent directories, mode 0700, and the file, mode 0600) `path` for
    /// appending. An existing file readable by others is made private (0600).
    ///
    /// When the existing file is non-empty and does not end with `\n` (a torn tail left by a
    /// crash), the next record is prefixed with `\n` so it starts on its own line.
    pub fn open(path: &Path) -> io::Result<TraceFile> {
        Self::open_as(path, false)
    }

    /// [`TraceFile::open`] for a trace that should not exist yet (a new session's): made with
    /// `O_EXCL`, so it is known to be empty without a `stat`. A file that exists after all is
    /// opened, and healed, as by [`TraceFile::open`].
    pub fn create(path: &Path) -> io::Result<TraceFile> {
        match Self::open_as(path, true) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Self::open(path),
            opened => opened,
        }
    }

    /// Opens `path` for appending; `new`: only if it does not exist yet.
    fn open_as(path: &Path, new: bool) -> io::Result<TraceFile> {
        let open = || {
            let mut options = OpenOptions::new();
            options.read(true).append(true).mode(PRIVATE_FILE_MODE);
            if new {
                options.create_new(true);
            } else {
                options.create(true);
            }
            options.open(path)
        };
        // The directory usually exists (a day's directory holds many traces): it is created
        // only when the first open says it is missing, not probed before every open.
        let file = match open() {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    Some(parent) => {
                        create_private_dir_all(parent)?;
                        open()?
                    }
                    None => return Err(e),
                }
            }
            opened => opened?,
        };
        if new {
            return Ok(Self::of(file, path, false));
        }
        let meta = file.metadata()?;
        let mode = meta.permissions().mode();
        if is_shared(mode) {
            file.set_permissions(Permissions::from_mode(PRIVATE_FILE_MODE))?;
            tracing::warn!(
                "[trace] {} was readable by other users; its mode is now 0600",
                path.display()
            );
        }
        let len = meta.len();
        let torn = if len > 0 {
            let mut last = [0u8; 1];
            file.read_exact_at(&mut last, len - 1)?;
            last[0] != b'\n'
        } else {
            false
        };
        if torn {
            tracing::warn!(
                "[trace] {} ends in a partial line; the next record starts on a new line",
                path.display()
            );
        }
        Ok(Self::of(file, path, torn))
    }

    fn of(file: File, path: &Path, torn: bool) -> TraceFile {
        TraceFile {
            file,
            path: path.to_path_buf(),
            torn,
            bytes_written: 0,
        }
    }

    /// Appends one record. `line` is the serialized record without its newline; the file gets
    /// `[\n if the tail is torn] + line + \n` in a single `writev(2)` (looping only on short
    /// writes), without copying `line`.
    ///
    /// An error after partial progress marks the tail torn, so the next append heals it. A
    /// write that makes no progress fails with
    /// `Trace append made no progress at byte <n> of <total>`.
    pub fn append(&mut self, line: &[u8]) -> io::Result<()> {
        let head = self.heal();
        let (done, result) = write_parts(&mut self.file, head, &[line, b"\n"]);
        self.finish(done, result)
    }

    /// Like [`Self::append`] for whole records that already end with their newlines, one or
    /// more a buffer: written as they are, in order, with one `writev(2)` per
    /// [`MAX_SLICES`](super::batch::MAX_SLICES) buffers and no copy.
    pub fn append_records<B: AsRef<[u8]>>(&mut self, records: &[B]) -> io::Result<()> {
        let head = self.heal();
        let (done, result) = write_parts(&mut self.file, head, records);
        self.finish(done, result)
    }

    /// What goes before the next record: a newline when the tail is torn.
    fn heal(&self) -> &'static [u8] {
        if self.torn { b"\n" } else { b"" }
    }

    /// Books the outcome of one record write: `done` bytes reached the file. Success clears a
    /// torn tail. A failure after partial progress cuts the partial record off again (the file
    /// is as it was before the write); only if that fails too is the tail left torn.
    fn finish(&mut self, done: usize, result: io::Result<()>) -> io::Result<()> {
        match result {
            Ok(()) => {
                self.bytes_written += done as u64;
                self.torn = false;
                Ok(())
            }
            Err(e) => {
                if done > 0
                    && let Err(cut) = self.cut_back(done as u64)
                {
                    tracing::warn!(
                        "[trace] cannot remove a partial record from {}: {cut}",
                        self.path.display()
                    );
                    self.bytes_written += done as u64;
                    self.torn = true;
                }
                Err(e)
            }
        }
    }

    /// Removes the last `n` bytes (a partial record this handle just wrote).
    fn cut_back(&mut self, n: u64) -> io::Result<()> {
        let len = self.file.metadata()?.len();
        self.file.set_len(len.saturating_sub(n))
    }

    /// Flushes the file's data to the device (`fdatasync`).
    pub fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// Takes the session's exclusive owner lock on this handle (see [`super::lock`]). As the
    /// owner it then repairs a torn tail once (see `repair_tail`), so no reader meets
    /// that line again.
    pub fn lock(&mut self) -> Result<(), super::lock::LockError> {
        super::lock::lock_exclusive(&self.file)?;
        // `torn` as seen at open: a clean or new file costs nothing more.
        if self.torn
            && let Err(e) = self.repair_tail()
        {
            // The tail stays torn: the next record starts on a new line, as without the lock.
            tracing::warn!(
                "[trace] cannot repair the torn tail of {}: {e}",
                self.path.display()
            );
        }
        Ok(())
    }

    /// A file that does not end with `\n` (a crash mid-write): a last line that is a whole
    /// record gets its newline; any other fragment is cut off (`set_len` to the end of the last
    /// whole line), with a warning. Only the lock holder may call it: nobody else appends.
    fn repair_tail(&mut self) -> io::Result<()> {
        let len = self.file.metadata()?.len();
        let start = match last_line_start(&self.file, len)? {
            Some(start) => start,
            None => {
                self.torn = false;
                return Ok(());
            }
        };
        let mut fragment = vec![0u8; usize::try_from(len - start).map_err(io::Error::other)?];
        self.file.read_exact_at(&mut fragment, start)?;
        if super::reader::is_record(&fragment) {
            // Whole but unterminated: the heal prefix terminates it with the next record.
            self.torn = true;
            return Ok(());
        }
        self.file.set_len(start)?;
        self.torn = false;
        tracing::warn!(
            "[trace] cut a torn last line ({} bytes) off {}",
            len - start,
            self.path.display()
        );
        Ok(())
    }

    /// Releases the owner lock (the file stays open).
    pub fn unlock(&self) {
        super::lock::unlock(&self.file);
    }

    /// The path this handle was opened on.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes written through this handle since it was opened (heal prefixes included).
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }
}

/// The offset where the unterminated last line of a file of `len` bytes starts (just after its
/// last `\n`, or 0); `None` when the file is empty or ends with `\n`.
fn last_line_start(file: &File, len: u64) -> io::Result<Option<u64>> {
    if len == 0 {
        return Ok(None);
    }
    let mut buf = vec![0u8; TAIL_CHUNK as usize];
    let mut end = len;
    let mut first = true;
    while end > 0 {
        let begin = end.saturating_sub(TAIL_CHUNK);
        let chunk = &mut buf[..(end - begin) as usize];
        file.read_exact_at(chunk, begin)?;
        if first && chunk.last() == Some(&b'\n') {
            return Ok(None);
        }
        first = false;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(Some(begin + i as u64 + 1));
        }
        end = begin;
    }
    Ok(Some(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{OmniMessage, StopReason, build};
    use crate::trace::batch::tests::Scripted;
    use crate::trace::reader::read_trace;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn append_writes_exactly_the_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("traces/2026-07-18/s_001.jsonl");
        let mut f = TraceFile::open(&path).unwrap();
        assert_eq!(f.path(), path.as_path());
        f.append(br#"{"a":1}"#).unwrap();
        f.append(b"second").unwrap();
        f.append(b"").unwrap();
        f.sync().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"a\":1}\nsecond\n\n");
        assert_eq!(f.bytes_written(), 16);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o600, 0o600, "owner can read and write");
        assert_eq!(mode & 0o111, 0, "not executable");
    }

    #[test]
    fn reopening_a_clean_file_appends_without_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        TraceFile::open(&path).unwrap().append(b"one").unwrap();
        let mut f = TraceFile::open(&path).unwrap();
        f.append(b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"one\ntwo\n");
        assert_eq!(f.bytes_written(), 4);
    }

    #[test]
    fn create_makes_a_new_file_and_opens_an_existing_one_as_open_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("day/t.jsonl");
        let mut f = TraceFile::create(&path).unwrap();
        f.append(b"one").unwrap();
        drop(f);
        assert_eq!(std::fs::read(&path).unwrap(), b"one\n");
        // There after all, with a torn tail: appended to and healed, never truncated.
        std::fs::write(&path, "one\ntw").unwrap();
        let mut f = TraceFile::create(&path).unwrap();
        f.append(b"three").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"one\ntw\nthree\n");
        assert_eq!(f.bytes_written(), 7);
    }

    #[test]
    fn torn_tail_is_healed_on_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let first = build::user_text("hello", None).to_json();
        let half = build::assistant_text("cut", StopReason::Completed).to_json();
        let half = &half[..half.len() / 2];
        std::fs::write(&path, format!("{first}\n{half}")).unwrap();

        let mut f = TraceFile::open(&path).unwrap();
        let next = build::request_begin().to_json();
        f.append(next.as_bytes()).unwrap();
        f.append(b"after").unwrap();
        assert_eq!(f.bytes_written(), (1 + next.len() + 1 + 6) as u64);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("{first}\n{half}\n{next}\nafter\n"));

        // The half record is now a malformed middle line; the new record is intact.
        std::fs::write(&path, format!("{first}\n{half}")).unwrap();
        let mut f = TraceFile::open(&path).unwrap();
        f.append(next.as_bytes()).unwrap();
        let read = read_trace(&path).unwrap();
        assert_eq!(read.skipped_lines, vec![2]);
        assert!(!read.torn_tail);
        assert_eq!(
            read.records,
            vec![
                OmniMessage::from_json(&first).unwrap(),
                OmniMessage::from_json(&next).unwrap()
            ]
        );
    }

    #[test]
    fn the_lock_holder_cuts_a_torn_fragment_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let first = build::user_text("hello", None).to_json();
        // A fragment longer than one read chunk, so its start is found across chunks.
        let fragment = format!("{{\"type\":\"model_msg\",\"x\":\"{}", "y".repeat(200_000));
        std::fs::write(&path, format!("{first}\n{fragment}")).unwrap();
        let mut f = TraceFile::open(&path).unwrap();
        f.lock().unwrap();
        assert!(!f.torn);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{first}\n")
        );
        let next = build::request_begin().to_json();
        f.append(next.as_bytes()).unwrap();
        drop(f);
        let read = read_trace(&path).unwrap();
        assert!(read.skipped_lines.is_empty() && !read.torn_tail);
        assert_eq!(read.records.len(), 2);

        // A file that is only a fragment is cut to nothing.
        std::fs::write(&path, "{\"half").unwrap();
        let mut f = TraceFile::open(&path).unwrap();
        f.lock().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"");
    }

    #[test]
    fn the_lock_holder_keeps_a_whole_unterminated_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let first = build::user_text("hello", None).to_json();
        std::fs::write(&path, &first).unwrap();
        let mut f = TraceFile::open(&path).unwrap();
        f.lock().unwrap();
        assert!(f.torn, "terminated by the next record");
        f.append(b"next").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{first}\nnext\n")
        );
    }

    #[test]
    fn an_existing_shared_file_is_made_private_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("day/t.jsonl");
        TraceFile::open(&path).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        TraceFile::open(&path).unwrap();
        assert_eq!(mode(&path), 0o600);
    }

    #[test]
    fn failure_after_progress_removes_the_partial_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let mut f = TraceFile::open(&path).unwrap();
        f.append(b"kept").unwrap();

        // A record that died after 3 bytes reached the file.
        let mut w = Scripted::new(vec![Ok(3), Err(io::Error::other("disk gone"))]);
        let (done, r) = write_parts(&mut w, b"", &[b"half record\n"]);
        f.file.write_all(&w.out).unwrap();
        let e = f.finish(done, r).unwrap_err();
        assert_eq!(e.to_string(), "disk gone");
        assert!(!f.torn, "the partial record was cut off");
        assert_eq!(std::fs::read(&path).unwrap(), b"kept\n");
        assert_eq!(f.bytes_written(), 5);

        f.append(b"next").unwrap();
        assert!(!f.torn);
        assert_eq!(std::fs::read(&path).unwrap(), b"kept\nnext\n");
        assert_eq!(f.bytes_written(), 5 + 5);
    }

    #[test]
    fn zero_progress_failure_does_not_mark_torn() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let mut f = TraceFile::open(&path).unwrap();
        // A read-only descriptor: the kernel refuses the write (EBADF), nothing is written.
        let writable = std::mem::replace(&mut f.file, File::open(&path).unwrap());
        let err = f.append(b"lost").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EBADF));
        assert!(!f.torn);
        assert_eq!(f.bytes_written(), 0);
        f.file = writable;
        f.append(b"kept").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"kept\n");
    }

    #[test]
    fn full_device_error_is_returned() {
        let Ok(full) = OpenOptions::new().append(true).open("/dev/full") else {
            return; // not Linux
        };
        let dir = tempfile::tempdir().unwrap();
        let mut f = TraceFile::open(&dir.path().join("t.jsonl")).unwrap();
        f.file = full;
        let err = f.append(b"x").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
        assert!(!f.torn);
        assert_eq!(f.bytes_written(), 0);
    }

    #[test]
    fn multi_megabyte_record_is_appended_intact() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let big: String = "0123456789abcdef\u{e9}".repeat(300_000); // ~5.4 MB
        let msg = build::tool_call_output("call_0", big, vec![], StopReason::Completed);
        let line = msg.to_json();
        let mut f = TraceFile::open(&path).unwrap();
        f.append(line.as_bytes()).unwrap();
        f.append(build::request_begin().to_json().as_bytes())
            .unwrap();
        let read = read_trace(&path).unwrap();
        assert_eq!(read.records.len(), 2);
        assert_eq!(read.records[0], msg);
        assert!(read.skipped_lines.is_empty());
        assert!(!read.torn_tail);
    }

    #[test]
    fn concurrent_appends_on_separate_handles_produce_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let threads = 4;
        let per_thread = 50;
        // Every handle is opened before anyone writes: a handle opened while another one is
        // mid-append may see a partial tail and (harmlessly) start with a blank line.
        let opened = std::sync::Arc::new(std::sync::Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let path = path.clone();
                let opened = opened.clone();
                std::thread::spawn(move || {
                    let mut f = TraceFile::open(&path).unwrap();
                    opened.wait();
                    for i in 0..per_thread {
                        let fill = char::from(b'a' + t as u8).to_string().repeat(64 * 1024 + i);
                        f.append(format!("{t}:{i}:{fill}").as_bytes()).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with('\n'));
        let mut seen = std::collections::HashSet::new();
        for line in text.lines() {
            let mut parts = line.splitn(3, ':');
            let t: usize = parts.next().unwrap().parse().unwrap();
            let i: usize = parts.next().unwrap().parse().unwrap();
            let fill = parts.next().unwrap();
            let c = char::from(b'a' + t as u8);
            assert_eq!(fill.len(), 64 * 1024 + i, "line {t}:{i} is not whole");
            assert!(fill.chars().all(|x| x == c), "line {t}:{i} is interleaved");
            assert!(seen.insert((t, i)), "line {t}:{i} twice");
        }
        assert_eq!(seen.len(), threads * per_thread);
    }

    #[test]
    fn open_fails_cleanly_when_the_parent_is_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("traces");
        std::fs::write(&blocker, b"").unwrap();
        assert!(TraceFile::open(&blocker.join("d/s_001.jsonl")).is_err());
    }
}
