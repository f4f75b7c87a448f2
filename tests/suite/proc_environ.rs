//! The provider key and the serve token never reach a command through `/proc`: a command walks
//! from its own process up to PID 1 and copies every ancestor's `/proc/<pid>/environ` and
//! `cmdline`, rookery's included (rookery moves its environment out of its initial one by
//! re-executing itself, and is non-dumpable); none holds a secret.

use crate::common::cli::*;
use crate::common::serve as harness;

use std::path::Path;

use serde_json::{Value, json};

/// A shell command copying `environ` and `cmdline` of every ancestor into `dir`
/// (`env-<pid>`, `cmd-<pid>`), from its own shell up to PID 1.
fn walk_ancestors(dir: &Path) -> String {
    let d = dir.display();
    format!(
        "p=$$; while [ \"$p\" -gt 1 ]; do \
           cat /proc/$p/environ > {d}/env-$p 2>/dev/null; \
           cat /proc/$p/cmdline > {d}/cmd-$p 2>/dev/null; \
           p=$(sed -n 's/^PPid:[[:space:]]*//p' /proc/$p/status); \
         done; echo walked"
    )
}

fn walk_script(dir: &Path) -> Value {
    json!({"turns": [
        {"tool_calls": [{"name": "exec_command",
            "arguments": {"description": "read the ancestors", "cmd": walk_ancestors(dir)}}]},
        {"text": "done"}]})
}

fn unique(tag: &str) -> String {
    format!("{tag}-{:016x}", rand_u64())
}

fn rand_u64() -> u64 {
    let mut b = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .unwrap();
    u64::from_le_bytes(b)
}

/// Every file the walk wrote holds none of `secrets`; the walk reached `rookery_pid` and, as
/// root (whom non-dumpable does not stop), read its environment.
fn assert_no_secret(dir: &Path, rookery_pid: u32, secrets: &[&str]) {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let bytes = std::fs::read(entry.path()).unwrap();
        let text = String::from_utf8_lossy(&bytes).to_lowercase();
        for secret in secrets {
            assert!(
                !text.contains(&secret.to_lowercase()),
                "{name} holds a secret: {text}"
            );
        }
        names.push(name);
    }
    let env = format!("env-{rookery_pid}");
    assert!(names.contains(&env), "the walk missed rookery: {names:?}");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let read = std::fs::read(dir.join(&env)).unwrap();
        assert!(!read.is_empty(), "rookery's environment was not read");
    }
}

#[test]
fn run_leaves_the_provider_keys_out_of_every_ancestors_proc_files() {
    let sb = Sandbox::new();
    let dir = sb.path("walk");
    std::fs::create_dir(&dir).unwrap();
    let (openai, anthropic) = (unique("sk-openai"), unique("sk-ant"));
    let script = sb.script(&walk_script(&dir));
    let mut cmd = sb.run_command(&["--json", "--script", s(&script), "go"]);
    cmd.env("OPENAI_API_KEY", &openai)
        .env("ANTHROPIC_API_KEY", &anthropic);
    let run = Running::spawn(cmd);
    let pid = run.pid();
    let out = run.wait(RUN_TIMEOUT);
    out.expect_code(0);
    let lines = json_lines(&out);
    let output = of_kind(&lines, "tool_call_output");
    assert!(
        output[0]["payload"]["output"]
            .as_str()
            .is_some_and(|o| o.contains("walked")),
        "{output:?}"
    );
    assert_no_secret(&dir, pid, &[&openai, &anthropic]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_leaves_the_token_out_of_every_ancestors_proc_files() {
    let sandbox = tempfile::tempdir().unwrap();
    let dir = sandbox.path().join("walk");
    std::fs::create_dir(&dir).unwrap();
    let token = unique("serve-token");
    let server = harness::Server::start_in(harness::sandbox(&walk_script(&dir)), Some(&token));
    let id = server.create(Some("allow-all")).await;
    let after = server.task(&id, "go").await;
    let events = server.events_until_task_end(&id, after).await;
    let walked = events.iter().any(|(_, v)| {
        v["payload"]["type"] == "tool_call_output"
            && v["payload"]["output"]
                .as_str()
                .is_some_and(|o| o.contains("walked"))
    });
    assert!(walked, "{events:?}");
    assert_no_secret(&dir, server.pid().as_raw() as u32, &[&token]);
}
