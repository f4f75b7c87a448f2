//! What this machine can enforce, found out once per process and cached: a Landlock ABI with
//! the rights the ruleset needs, seccomp filters for this architecture, and user + PID + mount
//! namespaces in which a process can map itself and mount a fresh `/proc` (the first process
//! of the namespaces is cloned, sets them up, and exits). [`check`] turns a missing piece into
//! `SandboxError::Unavailable` naming it, so a session that asks for a sandbox never runs
//! without one.
//!
//! It changes nothing of the calling process and spawns only the short-lived probe child.

use std::sync::OnceLock;

use super::confinement::{ChildFailure, step};
use super::namespaces::NsSetup;
use super::{SandboxError, SandboxMode, landlock_rules, seccomp_filter};

/// One mechanism a sandbox needs that this machine or build lacks (its text names it).
#[derive(Debug, thiserror::Error)]
pub(super) enum Missing {
    /// The kernel's Landlock is older than the ruleset needs, or absent.
    #[error("Landlock ABI {needed} or newer (the kernel has {has})")]
    Landlock {
        /// The ABI the ruleset needs.
        needed: i64,
        /// What the kernel reported (`none` without Landlock).
        has: String,
    },
    /// The kernel has no seccomp filters.
    #[error("seccomp filters (the kernel has none)")]
    Seccomp,
    /// seccompiler cannot build filters for this architecture.
    #[error("seccomp filters for {0}")]
    SeccompArch(&'static str),
    /// The init's raw system calls exist for x86_64 and aarch64 only.
    #[error("the sandbox's init for {0} (x86_64 and aarch64 only)")]
    InitArch(&'static str),
    /// The namespaces' set-up strings could not be built.
    #[error("user, PID and mount namespaces ({0})")]
    NsSetup(#[source] SandboxError),
    /// The probe child could not be cloned into the namespaces.
    #[error("user and PID namespaces (clone: {0})")]
    Clone(#[source] std::io::Error),
    /// The probe child failed a step of the set-up.
    #[error("user, PID and mount namespaces with a fresh /proc ({step}: {errno})")]
    Namespaces {
        /// What the step did.
        step: &'static str,
        /// Its OS error.
        #[source]
        errno: std::io::Error,
    },
}

/// `LANDLOCK_CREATE_RULESET_VERSION`: ask the ABI version instead of creating a ruleset.
const LANDLOCK_VERSION: libc::c_uint = 1;

/// Fails with what is missing when `mode` cannot be enforced here (`off` always can).
pub fn check(mode: SandboxMode) -> Result<(), SandboxError> {
    if mode == SandboxMode::Off {
        return Ok(());
    }
    static PROBE: OnceLock<Vec<Missing>> = OnceLock::new();
    let missing = PROBE.get_or_init(probe);
    if missing.is_empty() {
        return Ok(());
    }
    Err(SandboxError::Unavailable {
        mode,
        missing: missing
            .iter()
            .map(Missing::to_string)
            .collect::<Vec<_>>()
            .join("; "),
    })
}

/// Every mechanism missing here (none: the sandbox can be enforced).
fn probe() -> Vec<Missing> {
    let mut missing = Vec::new();
    // SAFETY: a null attribute with size 0 and the version flag only returns a number.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_VERSION,
        )
    };
    let needed = landlock_rules::ABI_NEEDED as i64;
    if abi < needed {
        let has = if abi < 0 {
            "none".to_string()
        } else {
            abi.to_string()
        };
        missing.push(Missing::Landlock { needed, has });
    }
    // SAFETY: PR_GET_SECCOMP takes no pointer; -1 means the kernel has no seccomp.
    if unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) } == -1 {
        missing.push(Missing::Seccomp);
    }
    if let Err(m) = seccomp_filter::target_arch() {
        missing.push(m);
    }
    if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        missing.push(Missing::InitArch(std::env::consts::ARCH));
    }
    if let Err(m) = namespaces_usable() {
        missing.push(m);
    }
    if missing.is_empty() {
        tracing::debug!(landlock_abi = abi, "sandbox mechanisms available");
    }
    missing
}

struct ProbeArgs<'a> {
    setup: &'a NsSetup,
    failure: ChildFailure,
}

extern "C" fn probe_child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `ProbeArgs` the parent keeps alive (CLONE_VFORK suspends it until
    // this child exits); only raw system calls run here.
    unsafe {
        let a = &mut *(arg as *mut ProbeArgs<'_>);
        if let Err(f) = a.setup.enter(true) {
            a.failure = f;
            libc::_exit(1);
        }
        libc::_exit(0)
    }
}

/// Clones a child into fresh user, PID and mount namespaces that maps itself and mounts `/proc`.
fn namespaces_usable() -> Result<(), Missing> {
    const STACK: usize = 64 * 1024;
    let setup = NsSetup::new(&[]).map_err(Missing::NsSetup)?;
    let mut args = ProbeArgs {
        setup: &setup,
        failure: ChildFailure { step: 0, errno: 0 },
    };
    let mut stack = vec![0u8; STACK];
    let flags = libc::CLONE_VM
        | libc::CLONE_VFORK
        | libc::CLONE_NEWUSER
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWNS
        | libc::SIGCHLD;
    // SAFETY: the stack grows down from its 16-byte aligned top; `args` and `stack` outlive
    // the child because CLONE_VFORK suspends this thread until it exits. Signals are blocked
    // around the clone so no handler of ours runs on the child's stack.
    let pid = unsafe {
        let top = stack.as_mut_ptr().add(STACK);
        let top = top.sub(top as usize % 16);
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(
            probe_child,
            top.cast(),
            flags,
            (&mut args as *mut ProbeArgs<'_>).cast(),
        );
        let err = std::io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid == -1 {
            return Err(Missing::Clone(err));
        }
        pid
    };
    let mut status = 0;
    // SAFETY: reaps our own child (it has exited: CLONE_VFORK returned).
    unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
    // SAFETY: the child wrote the field before it exited.
    let failure = unsafe { std::ptr::read_volatile(&args.failure) };
    if failure.errno != 0 {
        return Err(Missing::Namespaces {
            step: step::name(failure.step),
            errno: std::io::Error::from_raw_os_error(failure.errno),
        });
    }
    Ok(())
}
