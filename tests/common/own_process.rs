//! Running one test in a process of its own. All integration tests share one process (one test
//! binary), so a test that changes process-wide state — a signal disposition, which children
//! inherit across `exec` — would change it for every test running beside it. Such a test calls
//! [`own_process`] first: in the test binary's process it runs the same test again in a child
//! process (this binary, filtered to exactly that test) and checks that it passed there; in the
//! child it lets the body run.

use std::process::Command;

/// Set in the child process, to the name of the test it runs.
const CHILD: &str = "ROOKERY_TEST_OWN_PROCESS";

/// `true` in the child process: run the test's body. `false` in the parent, after the child ran
/// the test and it passed (a failure there fails the test here, with the child's output).
/// `module` is the caller's `module_path!()`, `test` its function name.
pub fn own_process(module: &str, test: &str) -> bool {
    // libtest names a test by its path inside the crate, without the crate's name.
    let path = module.split_once("::").map_or(module, |(_, rest)| rest);
    let name = format!("{path}::{test}");
    if std::env::var(CHILD).is_ok_and(|v| v == name) {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new(exe)
        .args(["--exact", &name, "--test-threads", "1", "--nocapture"])
        .env(CHILD, &name)
        .output()
        .expect("run the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{name} failed in its own process ({}):\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        out.status
    );
    false
}
