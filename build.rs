//! Build script: in release builds (`--release` and the profiles that inherit it) of the
//! `rookery` binary for x86_64 Linux, hands `link/rookery.order` to the linker as its symbol
//! ordering file, so the functions the standard workloads execute sit together at the start of
//! the text and a process maps about 3 MB of code instead of 9. It changes where
//! functions are placed, never what they do. See docs/link-order.md.
//!
//! It stays out of the way: nothing for other profiles, targets or linkers (the option is
//! LLD's, the default linker of that target since Rust 1.90), nothing when `ROOKERY_LINK_ORDER=0`;
//! symbols the file names that the build does not have are skipped without a warning.

use std::env;
use std::path::Path;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=link/rookery.order");
    println!("cargo::rerun-if-env-changed=ROOKERY_LINK_ORDER");
    if let Some(order) = ordering_file() {
        println!("cargo::rustc-link-arg-bin=rookery=-Wl,--symbol-ordering-file={order}");
        println!("cargo::rustc-link-arg-bin=rookery=-Wl,--no-warn-symbol-ordering");
    }
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
