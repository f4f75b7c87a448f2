//! `rookery run` under a small `RLIMIT_FSIZE` (`ulimit -f`): a file tool writing past the limit
//! and a trace record past it are write failures, never the end of the process by SIGXFSZ
//! (exit 153): a file tool's call gets its output and leaves its file whole and no `.tmp-`
//! file; a trace that cannot be written fails the run with the reason, and the task still ends.

use crate::common::cli::*;

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::process::Command;

use serde_json::json;

/// `cmd` with a soft and hard `RLIMIT_FSIZE` of `bytes`, set in the child before its `exec`.
fn limited(mut cmd: Command, bytes: u64) -> Command {
    // SAFETY: `setrlimit` is async-signal-safe and touches nothing of the parent.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

fn temp_files(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect()
}

fn edit(path: &str) -> serde_json::Value {
    json!({"name": "edit_file",
        "arguments": {"file_path": path, "old_string": "first", "new_string": "FIRST",
            "replace_all": true}})
}

#[test]
fn a_file_tool_past_the_file_size_limit_fails_its_call_and_the_run_goes_on() {
    let sb = Sandbox::new();
    // 256 KiB, four times the limit; `linked.txt` has a second link, so it is written in place.
    let big = format!("first\n{}", "x".repeat(255) + "\n").repeat(1024);
    for name in ["big.txt", "linked.txt"] {
        std::fs::write(sb.ws().join(name), &big).unwrap();
    }
    std::fs::hard_link(sb.ws().join("linked.txt"), sb.path("other-link.txt")).unwrap();
    assert_eq!(
        std::fs::metadata(sb.ws().join("linked.txt"))
            .unwrap()
            .nlink(),
        2
    );
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [edit("big.txt")]},
        {"tool_calls": [edit("linked.txt")]},
        {"text": "done"}]}));
    let cmd = limited(
        sb.run_command(&["--json", "--script", s(&script), "go"]),
        64 * 1024,
    );
    let out = Running::spawn(cmd).wait(RUN_TIMEOUT);
    // Not ended by SIGXFSZ (which a shell reports as exit 153).
    out.expect_code(0);
    let lines = json_lines(&out);
    let outputs = of_kind(&lines, "tool_call_output");
    assert_eq!(outputs.len(), 2, "{lines:?}");
    for out in outputs {
        let text = out["payload"]["output"].as_str().unwrap();
        assert!(
            text.contains("exceed this process's file size limit of 65536 bytes"),
            "{text}"
        );
    }
    assert_eq!(count(&lines, "task_end"), 1);
    // Both files whole, the in-place one too, and no temp file anywhere.
    for name in ["big.txt", "linked.txt"] {
        assert!(
            std::fs::read_to_string(sb.ws().join(name)).unwrap() == big,
            "{name}"
        );
    }
    assert_eq!(temp_files(&sb.ws()), Vec::<String>::new());
    let recs = read_records(&sb.trace());
    assert_eq!(count(&recs, "tool_call_output"), 2);
    assert_eq!(count(&recs, "task_end"), 1);
}

#[test]
fn a_trace_record_past_the_file_size_limit_fails_the_task_not_the_process() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "y".repeat(40_000)}]}));
    let cmd = limited(
        sb.run_command(&["--json", "--script", s(&script), "go"]),
        16 * 1024,
    );
    let out = Running::spawn(cmd).wait(RUN_TIMEOUT);
    // Not ended by SIGXFSZ (which a shell reports as exit 153).
    out.expect_code(1);
    let needle = format!(
        "rookery: trace write failed: File too large ({})",
        sb.trace().display()
    );
    assert!(
        out.stderr.lines().any(|l| l == needle),
        "{needle}\n{}",
        out.stderr
    );
    let lines = json_lines(&out);
    assert_eq!(count(&lines, "task_end"), 1, "{lines:?}");
    assert!(std::fs::metadata(sb.trace()).unwrap().len() <= 16 * 1024);
}
