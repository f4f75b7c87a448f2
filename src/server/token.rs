//! The bearer token of `rookery serve` when no `--token-env` names one: 256 random bits, new
//! at every start, written to `<home>/serve.token` (mode 0600) by an atomic rename that
//! replaces an older file.
//!
//! It makes and stores the token; it never prints or logs it (the caller prints the path).

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The token file's name inside the home directory.
pub const TOKEN_FILE: &str = "serve.token";

/// A fresh random token: 64 hex digits (256 bits from the OS-seeded CSPRNG).
pub fn generate() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `token` to `<home>/serve.token` (mode 0600, atomically); returns the path.
pub fn write_token_file(home: &Path, token: &str) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(home)?;
    let path = home.join(TOKEN_FILE);
    let tmp = home.join(format!(
        ".{TOKEN_FILE}.{}.{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        file.write_all(token.as_bytes())?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map(|()| path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file_is_private_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let a = generate();
        let b = generate();
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        let path = write_token_file(&home, &a).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let again = write_token_file(&home, &b).unwrap();
        assert_eq!(path, again);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{b}\n"));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let names: Vec<_> = std::fs::read_dir(&home).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file left");
    }
}
