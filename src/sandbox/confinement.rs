//! The kernel confinement of one session, built once from its layout by [`Confinement::prepare`]
//! (the Landlock ruleset descriptor, the compiled seccomp programs, the namespace strings) and
//! applied by the process layer between clone and exec: [`Confinement::enter_namespaces`],
//! [`Confinement::drop_inheritable_caps`] and [`Confinement::install_filters`] once per session
//! in the keeper of the session's user + PID +
//! mount namespaces, [`Confinement::restrict_command`] in each command about to exec (the
//! commands inherit the keeper's namespaces and seccomp filters), [`Confinement::apply_in_child`]
//! (all of it) in an MCP stdio server. It also holds the process layer's keeper
//! ([`KeeperSlot`]), so the keeper ends with the session's confinement.
//!
//! The child-side methods make raw system calls only (no allocation, no lock, no logging): they
//! run in a child of a multi-threaded process. This file spawns nothing.

use std::any::Any;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use seccompiler::BpfProgram;

use super::namespaces::NsSetup;
use super::{SandboxError, SandboxLayout, SandboxMode, landlock_rules, probe, seccomp_filter, sys};

/// The steps of the child side, as numbers a child can report through a pipe or shared
/// memory without allocating ([`name`](step::name) gives their text).
pub mod step {
    /// Writing `deny` to `/proc/self/setgroups`.
    pub const SETGROUPS: u32 = 1;
    /// Writing the uid map.
    pub const UID_MAP: u32 = 2;
    /// Writing the gid map.
    pub const GID_MAP: u32 = 3;
    /// Mounting `/proc` of the PID namespace.
    pub const MOUNT_PROC: u32 = 4;
    /// Hiding a `deny_read` directory under an empty tmpfs.
    pub const MASK_DIR: u32 = 5;
    /// Hiding a `deny_read` file under `/dev/null`.
    pub const MASK_FILE: u32 = 6;
    /// Dropping the capability bounding set.
    pub const CAP_BOUND: u32 = 7;
    /// Clearing the ambient capabilities.
    pub const CAP_AMBIENT: u32 = 8;
    /// Applying the Landlock ruleset.
    pub const LANDLOCK: u32 = 9;
    /// Setting `no_new_privs`.
    pub const NO_NEW_PRIVS: u32 = 10;
    /// Dropping the capabilities.
    pub const CAP_SET: u32 = 11;
    /// Installing the seccomp filter.
    pub const SECCOMP: u32 = 12;
    /// Creating the user and mount namespaces.
    pub const UNSHARE: u32 = 13;

    /// What step `code` did (`sandbox step N` for a number this module does not know).
    pub fn name(code: u32) -> &'static str {
        match code {
            SETGROUPS => "deny setgroups in the user namespace",
            UID_MAP => "write the uid map",
            GID_MAP => "write the gid map",
            MOUNT_PROC => "mount /proc of the PID namespace",
            MASK_DIR => "hide a deny_read directory",
            MASK_FILE => "hide a deny_read file",
            CAP_BOUND => "drop the capability bounding set",
            CAP_AMBIENT => "clear the ambient capabilities",
            LANDLOCK => "apply the Landlock ruleset",
            NO_NEW_PRIVS => "set no_new_privs",
            CAP_SET => "drop the capabilities",
            SECCOMP => "install the seccomp filter",
            UNSHARE => "create the user and mount namespaces",
            _ => "sandbox step",
        }
    }
}

/// A failed child-side step: which one ([`step`]) and the errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct ChildFailure {
    /// The failed step (a [`step`] constant).
    pub step: u32,
    /// The errno it failed with.
    pub errno: i32,
}

/// `_LINUX_CAPABILITY_VERSION_3`.
const CAP_V3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `struct sock_fprog`.
#[repr(C)]
struct SockFprog {
    len: libc::c_ushort,
    filter: *const seccompiler::sock_filter,
}

/// Where the process layer keeps the session's keeper (the process that holds its namespaces),
/// as an opaque value: dropped with the confinement, which ends the keeper.
#[derive(Default)]
pub struct KeeperSlot(tokio::sync::Mutex<Option<Arc<dyn Any + Send + Sync>>>);

impl KeeperSlot {
    /// Locks the slot (held while a keeper is looked up or started).
    pub async fn lock(&self) -> tokio::sync::MutexGuard<'_, Option<Arc<dyn Any + Send + Sync>>> {
        self.0.lock().await
    }
}

impl std::fmt::Debug for KeeperSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeeperSlot")
    }
}

/// A session's prepared confinement.
#[derive(Debug)]
pub struct Confinement {
    layout: SandboxLayout,
    ns: NsSetup,
    ruleset: OwnedFd,
    filters: Vec<BpfProgram>,
    /// The highest capability number of the kernel (the bounding set is dropped up to it).
    last_cap: libc::c_ulong,
    keeper: KeeperSlot,
}

impl Confinement {
    /// Builds the session's filters; fails closed when a mechanism is missing.
    pub fn prepare(layout: SandboxLayout) -> Result<Confinement, SandboxError> {
        if layout.mode == SandboxMode::Off {
            return Err(SandboxError::Unavailable {
                mode: layout.mode,
                missing: "a confinement for mode off (an unsandboxed session has none)".to_string(),
            });
        }
        probe::check(layout.mode)?;
        let ruleset = landlock_rules::build(&layout)?;
        let filters = seccomp_filter::build(layout.network)?;
        for f in &filters {
            if f.len() > usize::from(u16::MAX) {
                return Err(SandboxError::Setup {
                    what: "seccomp filter",
                    source: io::Error::other("the program is too long"),
                });
            }
        }
        let ns = NsSetup::new(&layout.deny_read)?;
        let last_cap = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(63);
        tracing::debug!(mode = %layout.mode, network = layout.network.as_str(), "sandbox prepared");
        Ok(Confinement {
            layout,
            ns,
            ruleset,
            filters,
            last_cap,
            keeper: KeeperSlot::default(),
        })
    }

    /// The layout the filters were built from.
    pub fn layout(&self) -> &SandboxLayout {
        &self.layout
    }

    /// The namespaces the session's keeper is cloned into (its own memory: a process that
    /// shares another's cannot later be the parent of processes in them cheaply, and the keeper
    /// outlives the spawning call).
    pub fn clone_flags(&self) -> libc::c_int {
        libc::CLONE_NEWUSER | libc::CLONE_NEWPID | libc::CLONE_NEWNS
    }

    /// The descriptor the child side reads (the Landlock ruleset): a keeper that closes
    /// everything else must keep it open.
    pub fn ruleset_fd(&self) -> RawFd {
        self.ruleset.as_raw_fd()
    }

    /// Where the process layer keeps this session's keeper.
    pub fn keeper_slot(&self) -> &KeeperSlot {
        &self.keeper
    }

    /// Child side, in the first process of the namespaces of [`Self::clone_flags`] (the
    /// keeper): the id maps, a fresh `/proc`, the `deny_read` masks. Raw system calls only.
    pub fn enter_namespaces(&self) -> Result<(), ChildFailure> {
        self.ns.enter(true)
    }

    /// Child side, the whole confinement of a process about to exec:
    /// [`Self::drop_inheritable_caps`], [`Self::restrict_command`], [`Self::install_filters`].
    /// Raw system calls only; afterwards nothing of it can be undone by the process or its
    /// descendants.
    pub fn restrict(&self) -> Result<(), ChildFailure> {
        self.drop_inheritable_caps()?;
        self.restrict_command()?;
        self.install_filters()
    }

    /// Child side, in the keeper once its namespaces are set up: installs the seccomp filters,
    /// which every command it starts inherits (installing them costs a compilation of the
    /// programs in the kernel each time, so it is done once per session). The keeper keeps its
    /// capabilities in its own user namespace (a command without any cannot inspect it).
    pub fn install_filters(&self) -> Result<(), ChildFailure> {
        for f in &self.filters {
            let prog = SockFprog {
                len: f.len() as libc::c_ushort,
                filter: f.as_ptr(),
            };
            sys::check(sys::call(
                libc::SYS_seccomp,
                [
                    libc::SECCOMP_SET_MODE_FILTER as usize,
                    0,
                    &prog as *const SockFprog as usize,
                    0,
                    0,
                    0,
                ],
            ))
            .map_err(|errno| ChildFailure {
                step: step::SECCOMP,
                errno,
            })?;
        }
        Ok(())
    }

    /// Child side, once in the keeper: empties the capability bounding set and the ambient set,
    /// which every process it starts inherits (the keeper's own capabilities stay: a command
    /// without any cannot inspect it). Raw system calls only.
    pub fn drop_inheritable_caps(&self) -> Result<(), ChildFailure> {
        let at = |step: u32| move |errno: i32| ChildFailure { step, errno };
        let prctl = |op: libc::c_int, arg: usize| {
            sys::check(sys::call(libc::SYS_prctl, [op as usize, arg, 0, 0, 0, 0]))
        };
        for cap in 0..=self.last_cap {
            match prctl(libc::PR_CAPBSET_DROP, cap as usize) {
                Ok(_) | Err(libc::EINVAL) => {}
                Err(errno) => return Err(at(step::CAP_BOUND)(errno)),
            }
        }
        let clear = sys::call(
            libc::SYS_prctl,
            [
                libc::PR_CAP_AMBIENT as usize,
                libc::PR_CAP_AMBIENT_CLEAR_ALL as usize,
                0,
                0,
                0,
                0,
            ],
        );
        match sys::check(clear) {
            Ok(_) | Err(libc::EINVAL) => Ok(()),
            Err(errno) => Err(at(step::CAP_AMBIENT)(errno)),
        }
    }

    /// Child side, in the command about to exec, in a process whose bounding and ambient sets
    /// are already empty ([`Self::drop_inheritable_caps`]): applies the Landlock ruleset, sets
    /// `no_new_privs`, drops every capability. The seccomp filters are not installed here
    /// ([`Self::install_filters`]). Raw system calls only (see `sys.rs`).
    pub fn restrict_command(&self) -> Result<(), ChildFailure> {
        let at = |step: u32| move |errno: i32| ChildFailure { step, errno };
        let prctl = |op: libc::c_int, arg: usize| {
            sys::check(sys::call(libc::SYS_prctl, [op as usize, arg, 0, 0, 0, 0]))
        };
        sys::check(sys::call(
            libc::SYS_landlock_restrict_self,
            [self.ruleset.as_raw_fd() as usize, 0, 0, 0, 0, 0],
        ))
        .map_err(at(step::LANDLOCK))?;
        prctl(libc::PR_SET_NO_NEW_PRIVS, 1).map_err(at(step::NO_NEW_PRIVS))?;
        let mut header = CapHeader {
            version: CAP_V3,
            pid: 0,
        };
        let data = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        sys::check(sys::call(
            libc::SYS_capset,
            [
                &mut header as *mut CapHeader as usize,
                data.as_ptr() as usize,
                0,
                0,
                0,
                0,
            ],
        ))
        .map_err(at(step::CAP_SET))?;
        Ok(())
    }

    /// The whole confinement for a `tokio::process::Command`'s `pre_exec` (an MCP stdio
    /// server): a new user + mount namespace (no PID namespace: the forked child cannot enter
    /// one itself; Landlock's scoping still keeps it from signalling, tracing or reading the
    /// memory and environment of processes outside), the `deny_read` masks, then
    /// [`Self::restrict`]. Async-signal-safe; the error is the failed step's errno.
    pub fn apply_in_child(&self) -> io::Result<()> {
        let flags = (libc::CLONE_NEWUSER | libc::CLONE_NEWNS) as usize;
        sys::check(sys::call(libc::SYS_unshare, [flags, 0, 0, 0, 0, 0]))
            .map_err(io::Error::from_raw_os_error)?;
        self.ns
            .enter(false)
            .and_then(|()| self.restrict())
            .map_err(|f| io::Error::from_raw_os_error(f.errno))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::NetworkAccess;

    fn layout(dir: &std::path::Path, mode: SandboxMode) -> SandboxLayout {
        SandboxLayout {
            mode,
            network: NetworkAccess::Off,
            workspace: dir.to_path_buf(),
            tmpdir: dir.to_path_buf(),
            writable: vec![dir.to_path_buf()],
            deny_read: vec![dir.join("secret")],
        }
    }

    #[test]
    fn mode_off_has_no_confinement() {
        let dir = tempfile::tempdir().unwrap();
        let err = Confinement::prepare(layout(dir.path(), SandboxMode::Off)).unwrap_err();
        assert!(matches!(err, SandboxError::Unavailable { .. }), "{err}");
    }

    #[test]
    fn a_sandbox_mode_prepares_on_a_kernel_that_has_the_mechanisms() {
        // The machines this crate is tested on have Landlock 6+, seccomp and user namespaces;
        // elsewhere `check` names what is missing and `prepare` must fail the same way.
        let dir = tempfile::tempdir().unwrap();
        let prepared = Confinement::prepare(layout(dir.path(), SandboxMode::WorkspaceWrite));
        match probe::check(SandboxMode::WorkspaceWrite) {
            Ok(()) => {
                let c = prepared.unwrap();
                assert_eq!(c.filters.len(), 2);
                assert_eq!(c.layout().mode, SandboxMode::WorkspaceWrite);
            }
            Err(e) => {
                let text = e.to_string();
                assert!(text.contains("unavailable on this machine"), "{text}");
                assert!(prepared.is_err());
            }
        }
        assert!(probe::check(SandboxMode::Off).is_ok());
    }

    #[test]
    fn every_step_has_its_own_text() {
        let texts: std::collections::HashSet<_> = (1..=13).map(step::name).collect();
        assert_eq!(texts.len(), 13);
        assert_eq!(step::name(999), "sandbox step");
    }
}
