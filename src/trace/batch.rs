//! A batch of whole trace records on its way to one file, and how it gets there: each record
//! stays in the buffer its sender serialized it into (none is copied into another), and the
//! batch is written with `writev(2)`, as many records a call as the kernel takes
//! ([`MAX_SLICES`]), so a burst of records is one system call and no copy in between.
//!
//! It owns the gathering and the vectored write loop (short writes and `EINTR` retried); it
//! must not open files, decide what is recorded, or heal torn tails (`file.rs` does).

use std::io::{self, IoSlice, Write};

/// Buffers passed to one `writev(2)`: Linux's `IOV_MAX`.
pub const MAX_SLICES: usize = 1024;

/// Whole records (each ending with its newline) gathered for one write, in order.
#[derive(Debug, Default)]
pub struct Batch {
    parts: Vec<Vec<u8>>,
    bytes: usize,
    records: u64,
}

impl Batch {
    /// A batch of one buffer holding `records` whole records.
    pub fn of(part: Vec<u8>, records: u64) -> Batch {
        let mut batch = Batch {
            parts: Vec::with_capacity(4),
            ..Batch::default()
        };
        batch.push(part, records);
        batch
    }

    /// A batch of whole records, one a buffer.
    pub fn from_parts(parts: Vec<Vec<u8>>) -> Batch {
        let bytes = parts.iter().map(Vec::len).sum();
        let records = parts.len() as u64;
        Batch {
            parts,
            bytes,
            records,
        }
    }

    /// Adds one buffer of `records` whole records after the others.
    pub fn push(&mut self, part: Vec<u8>, records: u64) {
        self.bytes += part.len();
        self.records += records;
        self.parts.push(part);
    }

    /// Adds every record of `more` after the others (its buffers are moved, not copied).
    pub fn append(&mut self, more: Batch) {
        if self.parts.is_empty() {
            *self = more;
            return;
        }
        self.bytes += more.bytes;
        self.records += more.records;
        self.parts.extend(more.parts);
    }

    /// True when the batch holds no record.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Bytes gathered.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Records gathered.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The buffers, in order.
    pub fn parts(&self) -> &[Vec<u8>] {
        &self.parts
    }

    /// The buffers, in order, taken out of the batch.
    pub fn into_parts(self) -> Vec<Vec<u8>> {
        self.parts
    }
}

/// Writes `head` then every part with as few `writev` calls as the writer allows (one per
/// [`MAX_SLICES`] buffers for a regular file, normally), retrying only short writes and
/// `EINTR`. Returns the bytes written and the outcome.
pub fn write_parts<W: Write, B: AsRef<[u8]>>(
    w: &mut W,
    head: &[u8],
    parts: &[B],
) -> (usize, io::Result<()>) {
    let total = head.len() + parts.iter().map(|p| p.as_ref().len()).sum::<usize>();
    let mut buffers = std::iter::once(head)
        .chain(parts.iter().map(AsRef::as_ref))
        .filter(|b| !b.is_empty())
        .peekable();
    let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity((parts.len() + 1).min(MAX_SLICES));
    let mut done = 0;
    while buffers.peek().is_some() {
        slices.clear();
        slices.extend(buffers.by_ref().take(MAX_SLICES).map(IoSlice::new));
        let mut left: &mut [IoSlice<'_>] = &mut slices;
        let mut remaining: usize = left.iter().map(|s| s.len()).sum();
        while remaining > 0 {
            match w.write_vectored(left) {
                Ok(0) => {
                    let message =
                        format!("Trace append made no progress at byte {done} of {total}");
                    return (done, Err(io::Error::new(io::ErrorKind::WriteZero, message)));
                }
                Ok(n) => {
                    let n = n.min(remaining);
                    done += n;
                    remaining -= n;
                    IoSlice::advance_slices(&mut left, n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return (done, Err(e)),
            }
        }
    }
    (done, Ok(()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A writer that follows a script of outcomes (`Ok(n)` accepts up to n bytes of the
    /// buffers given, across them, as `writev` does).
    pub(crate) struct Scripted {
        steps: std::collections::VecDeque<io::Result<usize>>,
        pub(crate) out: Vec<u8>,
        pub(crate) calls: usize,
        pub(crate) widest: usize,
    }

    impl Scripted {
        pub(crate) fn new(steps: Vec<io::Result<usize>>) -> Self {
            Scripted {
                steps: steps.into(),
                out: Vec::new(),
                calls: 0,
                widest: 0,
            }
        }
    }

    impl Write for Scripted {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.write_vectored(&[IoSlice::new(buf)])
        }
        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            self.calls += 1;
            self.widest = self.widest.max(bufs.len());
            let offered: usize = bufs.iter().map(|b| b.len()).sum();
            let mut n = self.steps.pop_front().unwrap_or(Ok(offered))?.min(offered);
            let taken = n;
            for b in bufs {
                let k = n.min(b.len());
                self.out.extend_from_slice(&b[..k]);
                n -= k;
            }
            Ok(taken)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn parts(texts: &[&str]) -> Vec<Vec<u8>> {
        texts.iter().map(|t| t.as_bytes().to_vec()).collect()
    }

    #[test]
    fn one_call_when_the_kernel_takes_everything() {
        let mut w = Scripted::new(vec![]);
        let (done, r) = write_parts(&mut w, b"", &parts(&["a\n", "", "bc\n"]));
        assert!(r.is_ok());
        assert_eq!((done, w.calls, w.out.as_slice()), (5, 1, &b"a\nbc\n"[..]));
        assert_eq!(w.widest, 2, "empty buffers are not passed");
    }

    #[test]
    fn short_writes_and_eintr_resume_inside_a_buffer() {
        let eintr = io::Error::from(io::ErrorKind::Interrupted);
        let mut w = Scripted::new(vec![Ok(2), Err(eintr), Ok(3)]);
        let (done, r) = write_parts(&mut w, b"\n", &parts(&["abc\n", "defg\n"]));
        assert!(r.is_ok());
        assert_eq!(
            (done, w.calls, w.out.as_slice()),
            (10, 4, &b"\nabc\ndefg\n"[..])
        );
    }

    #[test]
    fn more_buffers_than_one_call_takes_go_in_several() {
        let many: Vec<Vec<u8>> = (0..2 * MAX_SLICES + 1)
            .map(|i| format!("{i}\n").into_bytes())
            .collect();
        let mut w = Scripted::new(vec![]);
        let (done, r) = write_parts(&mut w, b"\n", &many);
        assert!(r.is_ok());
        let mut expected = b"\n".to_vec();
        many.iter().for_each(|p| expected.extend_from_slice(p));
        assert_eq!(done, expected.len());
        assert_eq!(w.out, expected);
        assert_eq!((w.calls, w.widest), (3, MAX_SLICES));
    }

    #[test]
    fn zero_progress_reports_the_exact_text() {
        let mut w = Scripted::new(vec![Ok(0)]);
        let (done, r) = write_parts(&mut w, b"", &parts(&["abcde"]));
        let e = r.unwrap_err();
        assert_eq!(done, 0);
        assert_eq!(e.kind(), io::ErrorKind::WriteZero);
        assert_eq!(
            e.to_string(),
            "Trace append made no progress at byte 0 of 5"
        );

        let mut w = Scripted::new(vec![Ok(2), Ok(0)]);
        let (done, r) = write_parts(&mut w, b"", &parts(&["ab", "cde"]));
        assert_eq!(done, 2);
        assert_eq!(
            r.unwrap_err().to_string(),
            "Trace append made no progress at byte 2 of 5"
        );
    }

    #[test]
    fn a_batch_counts_what_it_holds_and_moves_what_it_takes() {
        let mut b = Batch::default();
        assert!(b.is_empty());
        b.append(Batch::of(b"x\n".to_vec(), 1));
        b.push(b"y\nz\n".to_vec(), 2);
        let mut more = Batch::of(b"w\n".to_vec(), 1);
        let moved = more.parts()[0].as_ptr();
        more.push(b"v\n".to_vec(), 1);
        b.append(more);
        assert_eq!((b.bytes(), b.records(), b.parts().len()), (10, 5, 4));
        assert_eq!(
            b.parts()[2].as_ptr(),
            moved,
            "a buffer is moved, not copied"
        );
        let all: Vec<u8> = b.parts().concat();
        assert_eq!(all, b"x\ny\nz\nw\nv\n");
    }
}
