//! The Landlock ruleset of a session, created once (`landlock_create_ruleset`) and kept as a
//! descriptor that each sandboxed process applies to itself before exec
//! (`landlock_restrict_self`): read and execute everywhere, every file right inside the
//! writable roots (the only place `REFER`, i.e. linking and moving across directories, is
//! allowed), read/write on the terminal and the harmless character devices, and the scopes
//! (no signal to a process outside the sandbox; with the network off, no abstract unix socket
//! outside it, and no TCP bind or connect).
//!
//! It only builds the ruleset; it never restricts the calling process. Every requested right
//! is a hard requirement: a kernel that cannot enforce one fails the build instead of silently
//! enforcing less.

use std::os::fd::OwnedFd;
use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
};

use super::{NetworkAccess, SandboxError, SandboxLayout};

/// The Landlock ABI whose rights the ruleset uses (Linux 6.12: the signal and abstract unix
/// socket scopes).
pub(super) const ABI_NEEDED: ABI = ABI::V6;

/// Devices every process may open for writing (and send terminal ioctls to).
const DEVICES: [&str; 8] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

fn setup(what: &'static str, e: impl std::error::Error + Send + Sync + 'static) -> SandboxError {
    SandboxError::Setup {
        what,
        source: std::io::Error::other(e),
    }
}

/// Builds the session's ruleset and returns its descriptor (close-on-exec).
pub(super) fn build(layout: &SandboxLayout) -> Result<OwnedFd, SandboxError> {
    let abi = ABI_NEEDED;
    let all = AccessFs::from_all(abi);
    let read = AccessFs::from_read(abi);
    let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;
    let mut scopes: BitFlags<Scope> = Scope::Signal.into();
    if layout.network == NetworkAccess::Off {
        scopes |= Scope::AbstractUnixSocket;
    }
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(all)
        .map_err(|e| setup("landlock file rights", e))?
        .scope(scopes)
        .map_err(|e| setup("landlock scopes", e))?;
    if layout.network == NetworkAccess::Off {
        // No rule for it: every TCP bind and connect is refused (seccomp refuses the sockets
        // themselves; this is the second wall).
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(|e| setup("landlock network rights", e))?;
    }
    let mut created = ruleset.create().map_err(|e| setup("landlock ruleset", e))?;
    created = add(created, Path::new("/"), read, true)?;
    for dev in DEVICES {
        let path = Path::new(dev);
        if path.exists() {
            let access = if path.is_dir() {
                device | AccessFs::ReadDir
            } else {
                device
            };
            created = add(created, path, access, false)?;
        }
    }
    for root in &layout.writable {
        created = add(created, root, all, true)?;
    }
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or_else(|| SandboxError::Unavailable {
        mode: layout.mode,
        missing: "Landlock (the kernel has none)".to_string(),
    })
}

/// Adds a rule for `path` (file rights only when it is not a directory).
fn add(
    created: landlock::RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
    must_exist: bool,
) -> Result<landlock::RulesetCreated, SandboxError> {
    let fd = match PathFd::new(path) {
        Ok(fd) => fd,
        Err(e) if must_exist => {
            return Err(SandboxError::Path {
                path: path.to_path_buf(),
                source: std::io::Error::other(e),
            });
        }
        Err(_) => return Ok(created),
    };
    let access = if path.is_dir() {
        access
    } else {
        access & AccessFs::from_file(ABI_NEEDED)
    };
    created
        .add_rule(PathBeneath::new(fd, access))
        .map_err(|e| SandboxError::Path {
            path: path.to_path_buf(),
            source: std::io::Error::other(e),
        })
}
