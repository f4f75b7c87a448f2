//! Build script: in release builds (`--release` and the profiles that inherit it) of the
//! `rookery` binary for x86_64 Linux, hands `link/rookery.order` to the linker as its symbol
//! ordering file, so the functions the standard workloads execute sit together at the start of
//! the text and a process maps about 3 MB of code instead of 9. It changes where
//! functions are placed, never what they do. See docs/link-order.md.
//!
//! It stays out of the way: nothing for other profiles, targets or linkers (the option is
//! LLD's, the default linker of that target since Rust 1.90), nothing when `ROOKERY_LINK_ORDER=0`;
//! symbols the file names that the build does not have are skipped without a warning.
//!
//! It also names the commit being built for `rookery --version` (`ROOKERY_COMMIT`: `git
//! rev-parse --short HEAD`, `unknown` outside a git checkout or without git), and reruns when
//! HEAD moves (HEAD itself, the branch ref it points to, `packed-refs`).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=link/rookery.order");
    println!("cargo::rerun-if-env-changed=ROOKERY_LINK_ORDER");
    if let Some(order) = ordering_file() {
        println!("cargo::rustc-link-arg-bin=rookery=-Wl,--symbol-ordering-file={order}");
        println!("cargo::rustc-link-arg-bin=rookery=-Wl,--no-warn-symbol-ordering");
    }
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".to_string());
    println!("cargo::rustc-env=ROOKERY_COMMIT={commit}");
    for file in head_files() {
        println!("cargo::rerun-if-changed={}", file.display());
    }
}

/// One line of `git <args>` run in the package's directory, when git answers.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env::var_os("CARGO_MANIFEST_DIR")?)
        .output()
        .ok()?;
    let line = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !line.is_empty()).then_some(line)
}

/// The files whose change moves HEAD: `HEAD` of this checkout (a worktree has its own), the
/// ref it points to and `packed-refs` (both in the common git directory). Only existing paths:
/// cargo reruns a script on every build for a path that does not exist.
fn head_files() -> Vec<PathBuf> {
    let absolute = |p: String| {
        let p = PathBuf::from(p);
        if p.is_absolute() {
            p
        } else {
            Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join(p)
        }
    };
    let (Some(git_dir), Some(common)) = (
        git(&["rev-parse", "--git-dir"]).map(absolute),
        git(&["rev-parse", "--git-common-dir"]).map(absolute),
    ) else {
        return Vec::new();
    };
    let mut files = vec![git_dir.join("HEAD"), common.join("packed-refs")];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        let loose = common.join(branch);
        // A branch only in packed-refs gets its loose file at its next commit: watch its folder.
        match loose.parent() {
            Some(folder) if !loose.is_file() => files.push(folder.to_path_buf()),
            _ => files.push(loose),
        }
    }
    files.retain(|f| f.exists());
    files
}

/// The ordering file's path when this build should use it.
fn ordering_file() -> Option<String> {
    let var = |name: &str| env::var(name).unwrap_or_default();
    if var("PROFILE") != "release"
        || var("TARGET") != "x86_64-unknown-linux-gnu"
        || var("ROOKERY_LINK_ORDER") == "0"
    {
        return None;
    }
    // A linker of the user's choice may not know the option.
    if env::var_os("RUSTC_LINKER").is_some() || var("CARGO_ENCODED_RUSTFLAGS").contains("link") {
        return None;
    }
    let order = Path::new(&var("CARGO_MANIFEST_DIR")).join("link/rookery.order");
    order
        .is_file()
        .then(|| order.to_string_lossy().into_owned())
}
