//! Atomic file writes (stub, being written).
use std::path::Path;

/// Writes `contents` to `path` atomically (temp file + rename), keeping an existing file's mode.
pub fn write_atomic(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    std::fs::write(path, contents)
}
