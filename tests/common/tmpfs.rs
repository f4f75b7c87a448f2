//! A 1 MiB tmpfs mounted on an existing (empty) directory for the trace-failure tests,
//! unmounted (lazily) when dropped. `mount` needs privileges: without them the tests say so and skip.

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct SmallFs {
    dir: PathBuf,
}

impl SmallFs {
    /// Mounts a 1 MiB tmpfs, or `None` (with a message on stderr) when mounting is not permitted.
    pub fn mount(dir: &Path, test: &str) -> Option<SmallFs> {
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(dir)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(SmallFs {
                dir: dir.to_path_buf(),
            }),
            Ok(o) => {
                eprintln!(
                    "SKIPPED {test}: cannot mount a tmpfs ({})",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("SKIPPED {test}: cannot run mount: {e}");
                None
            }
        }
    }

    pub fn join(&self, p: &str) -> PathBuf {
        self.dir.join(p)
    }

    /// Writes zeros into `name` until the filesystem is full.
    pub fn fill(&self, name: &str) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.join(name)).unwrap();
        let block = vec![0u8; 4096];
        while f.write_all(&block).is_ok() {}
        let e = f.write_all(&block).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}
