//! Reading an opened regular file whole, only when it fits a cap: the size its `fstat` reported
//! decides first, and the read itself stops one byte past the cap, so a file that grew after
//! the `stat` is never read further (edit_file's content, write_file's diff read-back).
//!
//! It never opens, writes or words anything: what a file over the cap means is the caller's.

use std::io::{self, Read};

use super::file_target::Opened;

/// What [`read_capped`] found.
#[derive(Debug)]
pub enum Capped {
    /// The whole content, at most the cap.
    Whole(Vec<u8>),
    /// More than the cap: `size` is the file's size as last seen (more than the cap).
    TooLarge {
        /// The size in bytes (more than the cap).
        size: u64,
    },
}

/// The whole content of `opened` when it is at most `cap` bytes. Nothing is read when the
/// `fstat` size is over the cap, and at most `cap + 1` bytes are read otherwise.
pub fn read_capped(opened: &Opened, cap: u64) -> io::Result<Capped> {
    let size = opened.meta.len();
    if size > cap {
        return Ok(Capped::TooLarge { size });
    }
    let mut bytes = Vec::new();
    (&opened.file)
        .take(cap.saturating_add(1))
        .read_to_end(&mut bytes)?;
    let read = bytes.len() as u64;
    if read > cap {
        // It grew after the stat.
        let now = opened.file.metadata().map_or(read, |m| m.len());
        return Ok(Capped::TooLarge {
            size: now.max(read),
        });
    }
    Ok(Capped::Whole(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::file_target::open_regular;
    use std::fs;
    use std::io::{Seek, Write};

    #[test]
    fn fits_at_the_cap_and_refuses_one_byte_more_unread() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        fs::write(&f, b"0123456789").unwrap();
        let opened = open_regular(&f).unwrap();
        match read_capped(&opened, 10).unwrap() {
            Capped::Whole(bytes) => assert_eq!(bytes, b"0123456789"),
            other => panic!("{other:?}"),
        }
        let mut opened = open_regular(&f).unwrap();
        match read_capped(&opened, 9).unwrap() {
            Capped::TooLarge { size } => assert_eq!(size, 10),
            other => panic!("{other:?}"),
        }
        // Decided by the stat: not a byte was read.
        assert_eq!(opened.file.stream_position().unwrap(), 0);
    }

    #[test]
    fn a_file_that_grew_after_the_stat_is_read_one_byte_past_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        fs::write(&f, b"small").unwrap();
        // The stat says 5 bytes; then the file grows to 1 MiB + 5.
        let mut opened = open_regular(&f).unwrap();
        fs::OpenOptions::new()
            .append(true)
            .open(&f)
            .unwrap()
            .write_all(&vec![b'x'; 1024 * 1024])
            .unwrap();
        match read_capped(&opened, 16).unwrap() {
            Capped::TooLarge { size } => assert_eq!(size, 1024 * 1024 + 5),
            other => panic!("{other:?}"),
        }
        assert_eq!(opened.file.stream_position().unwrap(), 17);
    }
}
