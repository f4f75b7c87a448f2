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

/// `LANDLOCK_CREATE_RULESET_VERSION`: ask the ABI version instead of creating a ruleset.
const LANDLOCK_VERSION: libc::c_uint = 1;

/// Fails with what is missing when `mode` cannot be enforced here (`off` always can).
pub fn check(mode: SandboxMode) -> Result<(), SandboxError> {
    if mode == SandboxMode::Off {
        return Ok(());
    }
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    match PROBE.get_or_init(probe) {
        Ok(()) => Ok(()),
        Err(missing) => Err(SandboxError::Unavailable {
            mode,
            missing: missing.clone(),
        }),
    }
}

fn probe() -> Result<(), String> {
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
        missing.push(format!(
            "Landlock ABI {needed} or newer (the kernel has {has})"
        ));
    }
    // SAFETY: PR_GET_SECCOMP takes no pointer; -1 means the kernel has no seccomp.
    if unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) } == -1 {
        missing.push("seccomp filters (the kernel has none)".to_string());
    }
    if let Err(m) = seccomp_filter::target_arch() {
        missing.push(m);
    }
    if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        missing.push(format!(
            "the sandbox's init for {} (x86_64 and aarch64 only)",
            std::env::consts::ARCH
        ));
    }
    if let Err(m) = namespaces_usable() {
        missing.push(m);
    }
    if missing.is_empty() {
        tracing::debug!(landlock_abi = abi, "sandbox mechanisms available");
        Ok(())
    } else {
        Err(missing.join("; "))
    }
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
fn namespaces_usable() -> Result<(), String> {
    const STACK: usize = 64 * 1024;
    let setup = NsSetup::new(&[]).map_err(|e| e.to_string())?;
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
            return Err(format!("user and PID namespaces (clone: {err})"));
        }
        pid
    };
    let mut status = 0;
    // SAFETY: reaps our own child (it has exited: CLONE_VFORK returned).
    unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
    // SAFETY: the child wrote the field before it exited.
    let failure = unsafe { std::ptr::read_volatile(&args.failure) };
    if failure.errno != 0 {
        return Err(format!(
            "user, PID and mount namespaces with a fresh /proc ({}: {})",
            step::name(failure.step),
            std::io::Error::from_raw_os_error(failure.errno)
        ));
    }
    Ok(())
}
