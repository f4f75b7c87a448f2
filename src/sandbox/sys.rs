//! System calls that report their error in the return value and never touch `errno`. The
//! sandbox's child side runs in processes that share rookery's memory and the spawning
//! thread's TLS (a `CLONE_VM` clone), where libc's wrappers would write that thread's `errno`
//! and read it back after the thread changed it: a mask skipped for a wrong ENOENT would leave
//! a secret readable. Each call returns the kernel's value: `-errno` on failure.
//!
//! Only the calls' conventions live here; what to call is the callers' business.

/// `syscall(nr, a0..a5)`.
#[cfg(target_arch = "x86_64")]
pub fn call(nr: libc::c_long, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the Linux x86_64 system call convention (the kernel clobbers rcx and r11). The
    // callers pass arguments valid for their call.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") a[0],
            in("rsi") a[1],
            in("rdx") a[2],
            in("r10") a[3],
            in("r8") a[4],
            in("r9") a[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// `syscall(nr, a0..a5)`.
#[cfg(target_arch = "aarch64")]
pub fn call(nr: libc::c_long, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the Linux aarch64 system call convention. The callers pass valid arguments.
    unsafe {
        std::arch::asm!(
            "svc 0",
            in("x8") nr,
            inlateout("x0") a[0] as isize => ret,
            in("x1") a[1],
            in("x2") a[2],
            in("x3") a[3],
            in("x4") a[4],
            in("x5") a[5],
            options(nostack),
        );
    }
    ret
}

/// Elsewhere the sandbox is unavailable (`sandbox::check` says so): this only builds.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub fn call(nr: libc::c_long, a: [usize; 6]) -> isize {
    // SAFETY: never reached with a sandbox (the probe refuses this architecture).
    let r = unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) };
    if r == -1 {
        -(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL) as isize)
    } else {
        r as isize
    }
}

/// `Err(errno)` for a negative return.
pub fn check(r: isize) -> Result<isize, i32> {
    if r < 0 { Err((-r) as i32) } else { Ok(r) }
}
