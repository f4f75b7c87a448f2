//! Path hints for missing files (stub, being written).
use std::path::Path;

/// The hint appended after a "File not found" text (starts with a space), or "".
pub fn path_hint(_resolved: &Path) -> String {
    String::new()
}
