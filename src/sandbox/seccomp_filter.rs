//! The seccomp filters of a session, compiled once to BPF (crate `seccompiler`) and installed
//! by each sandboxed process before exec. They refuse what could undo or escape the other
//! walls: tracing and other processes' memory, new namespaces and mounts, kernel keyrings,
//! modules, BPF, perf, `userfaultfd`, `io_uring` (whose requests bypass seccomp), handle-based
//! opens. `clone3` answers ENOSYS so libc falls back to `clone`, whose flags a filter can see
//! (any `CLONE_NEW*` is refused). With the network off: `socket` only for `AF_UNIX` streams,
//! `socketpair` only for unix streams and seqpackets, no `connect` at all and no `sendto` to
//! an address, so no IP socket exists and no socket of the host (ssh-agent, docker, the
//! serve socket) can be reached.
//!
//! A foreign system call ABI (e.g. i386 on x86_64) kills the process (seccompiler's arch
//! check). It only compiles; it never installs a filter on the calling process.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::{NetworkAccess, SandboxError};

/// Refused with EPERM whatever their arguments.
const DENIED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_process_madvise,
    libc::SYS_pidfd_getfd,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_open_by_handle_at,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
];

/// The namespace flags `clone` may not carry (`CLONE_NEWTIME` only exists for `clone3`).
const CLONE_NEW: [u64; 7] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWCGROUP as u64,
];

/// `SOCK_*` types live in the low 4 bits of `socket`'s type argument (the rest are flags).
const SOCK_TYPE_MASK: u64 = 0xf;

fn setup(what: &'static str, e: seccompiler::BackendError) -> SandboxError {
    SandboxError::Setup {
        what,
        source: std::io::Error::other(e),
    }
}

fn cond(
    arg: u8,
    len: SeccompCmpArgLen,
    op: SeccompCmpOp,
    v: u64,
) -> Result<SeccompCondition, SandboxError> {
    SeccompCondition::new(arg, len, op, v).map_err(|e| setup("seccomp condition", e))
}

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, SandboxError> {
    SeccompRule::new(conds).map_err(|e| setup("seccomp rule", e))
}

/// Rules matching a socket type argument (arg `arg`) other than the `allowed` ones.
fn other_types(arg: u8, allowed: &[u64]) -> Result<Vec<SeccompRule>, SandboxError> {
    let mut rules = Vec::new();
    for t in 0..=SOCK_TYPE_MASK {
        if !allowed.contains(&t) {
            rules.push(rule(vec![cond(
                arg,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK),
                t,
            )?])?);
        }
    }
    Ok(rules)
}

/// The architecture of this build, or why seccomp filters cannot be built for it.
pub(super) fn target_arch() -> Result<TargetArch, super::probe::Missing> {
    TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| super::probe::Missing::SeccompArch(std::env::consts::ARCH))
}

/// The session's programs, in the order they are installed.
pub(super) fn build(network: NetworkAccess) -> Result<Vec<BpfProgram>, SandboxError> {
    let arch = target_arch().map_err(|m| SandboxError::Setup {
        what: "seccomp",
        source: std::io::Error::other(m),
    })?;
    let mut eperm: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &nr in DENIED {
        eperm.insert(nr, Vec::new());
    }
    let mut clone_rules = Vec::new();
    for flag in CLONE_NEW {
        clone_rules.push(rule(vec![cond(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(flag),
            flag,
        )?])?);
    }
    eperm.insert(libc::SYS_clone, clone_rules);
    if network == NetworkAccess::Off {
        let unix = libc::AF_UNIX as u64;
        let mut socket = vec![rule(vec![cond(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            unix,
        )?])?];
        socket.extend(other_types(1, &[libc::SOCK_STREAM as u64])?);
        eperm.insert(libc::SYS_socket, socket);
        let mut pair = vec![rule(vec![cond(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            unix,
        )?])?];
        pair.extend(other_types(
            1,
            &[libc::SOCK_STREAM as u64, libc::SOCK_SEQPACKET as u64],
        )?);
        eperm.insert(libc::SYS_socketpair, pair);
        eperm.insert(libc::SYS_connect, Vec::new());
        eperm.insert(
            libc::SYS_sendto,
            vec![rule(vec![cond(
                4,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::Ne,
                0,
            )?])?],
        );
    }
    let eperm = SeccompFilter::new(
        eperm,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| setup("seccomp filter", e))?;
    let mut enosys = BTreeMap::new();
    enosys.insert(libc::SYS_clone3, Vec::new());
    let enosys = SeccompFilter::new(
        enosys,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(|e| setup("seccomp filter", e))?;
    let mut programs = Vec::with_capacity(2);
    for f in [enosys, eperm] {
        programs.push(BpfProgram::try_from(f).map_err(|e| setup("seccomp compile", e))?);
    }
    Ok(programs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_off_adds_the_socket_rules() {
        let on = build(NetworkAccess::On).unwrap();
        let off = build(NetworkAccess::Off).unwrap();
        assert_eq!((on.len(), off.len()), (2, 2));
        // The clone3 program is the same; the EPERM one grows by the socket rules.
        assert_eq!(on[0], off[0]);
        assert!(off[1].len() > on[1].len());
    }
}
