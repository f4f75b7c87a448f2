//! Traces hold whole conversations: through the binary, under the usual umask (022), a home
//! `rookery run` creates is 0700, `traces/` and its date directories 0700 and trace files 0600;
//! an existing world-readable `traces/` is fixed at start with a notice, a resumed trace file
//! too, and a home the user made keeps its own mode.

use crate::common::cli as support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use serde_json::json;
use support::*;

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `cmd` run by `sh` under umask 022 (the usual one), whatever the test process's umask.
fn under_umask_022(cmd: &Command) -> Command {
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg("umask 022 && exec \"$@\"")
        .arg("sh")
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .current_dir(cmd.get_current_dir().unwrap());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    sh.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    sh
}

#[test]
fn a_new_home_its_traces_directories_and_files_are_private() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "hi"}]}));
    let home = sb.path("new/home");
    let mut cmd = sb.command();
    cmd.args(["run", "--workspace", s(&sb.ws()), "--home", s(&home)])
        .args(["--script", s(&script), "hello"]);
    let out = Running::spawn(under_umask_022(&cmd)).wait(RUN_TIMEOUT);
    out.expect_code(0);
    assert_eq!(mode(&home), 0o700, "the home rookery made");
    assert_eq!(mode(&sb.path("new")), 0o700, "its parent rookery made");
    let traces = home.join("traces");
    assert_eq!(mode(&traces), 0o700);
    let files = trace_files(&home);
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(
        mode(files[0].parent().unwrap()),
        0o700,
        "the date directory"
    );
    assert_eq!(mode(&files[0]), 0o600, "the trace file");
}

#[test]
fn an_existing_world_readable_traces_tree_is_fixed_at_start_with_a_notice() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "one"}, {"text": "two"}]}));
    let home = sb.home();
    let cmd = |resume: Option<&str>| {
        let mut cmd = sb.command();
        match resume {
            None => cmd
                .args(["run", "--workspace", s(&sb.ws()), "--home", s(&home)])
                .args(["--script", s(&script), "hello"]),
            Some(id) => cmd.args(["chat", "--home", s(&home), "--resume", id]),
        };
        under_umask_022(&cmd)
    };
    let out = Running::spawn(cmd(None)).wait(RUN_TIMEOUT);
    out.expect_code(0);
    let file = sb.trace();
    let day = file.parent().unwrap().to_path_buf();
    // As an older rookery (or a user) left them: everything readable by everyone.
    for (p, m) in [(&home, 0o755), (&home.join("traces"), 0o755), (&day, 0o755)] {
        chmod(p, m);
    }
    chmod(&file, 0o644);
    let id = read_records(&file)[0]["payload"]["session_id"]
        .as_str()
        .unwrap()
        .to_string();

    let out = Running::spawn(cmd(Some(&id))).wait(RUN_TIMEOUT);
    out.expect_code(0);
    assert_eq!(mode(&home), 0o755, "a home the user has keeps its mode");
    assert_eq!(mode(&home.join("traces")), 0o700);
    assert_eq!(mode(&day), 0o700);
    assert_eq!(mode(&file), 0o600, "the resumed trace file");
    let traces = home.join("traces");
    let notice = format!(
        "{} was readable by other users; its mode is now 0700",
        traces.display()
    );
    assert!(out.stderr.contains(&notice), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("was readable by other users; its mode is now 0600"),
        "{}",
        out.stderr
    );
}
