//! The whole Claude Code hook lifecycle through the real binary, with hook scripts as users
//! write them (bash + jq, python3, node) in a project's `.claude/settings.json` or the agent
//! config: a `UserPromptSubmit` that blocks a prompt (`run` exits 1, `chat` goes on, `serve`
//! answers 422 `prompt_blocked`, the model is never asked) or adds context; `SessionStart`
//! context (matched on its source: startup, a `chat --resume`) and `SessionEnd`; `Stop` making a
//! task go on twice, the cap of continuations, and `SubagentStop` in a child;
//! `PermissionRequest` answering allow / deny under `always-ask` with no terminal,
//! `Notification` when a call is asked; `PreCompact` and `SessionStart(compact)` on the API's
//! compact; and the `hook_decision` records of all of them. What the model received is read
//! from an OpenAI-compatible mock on 127.0.0.1.

use crate::common::cli as support;
use crate::common::openai_mock::{Mock, Reply, split};
use crate::common::serve::{Server, sandbox};

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::*;

fn hook_script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).expect("write hook");
    let mut perm = std::fs::metadata(&p).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&p, perm).expect("chmod");
    p
}

fn group(matcher: &str, command: &Path) -> Value {
    json!({"matcher": matcher, "hooks": [{"type": "command", "command": command.display().to_string(), "timeout": 60}]})
}

/// Writes `<ws>/.claude/settings.json` with `hooks`, as a user has it.
fn settings(ws: &Path, hooks: Value) -> PathBuf {
    let dir = ws.join(".claude");
    std::fs::create_dir_all(&dir).expect("mkdir .claude");
    let p = dir.join("settings.json");
    let body = json!({"permissions": {"allow": []}, "hooks": hooks});
    std::fs::write(&p, serde_json::to_string_pretty(&body).expect("json")).expect("write");
    p
}

/// A streamed text answer of the mock.
fn answer(text: &str) -> Reply {
    let first = json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": null}]});
    let end = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    Reply::Sse(split(
        &format!("data: {first}\n\ndata: {end}\n\ndata: [DONE]\n\n"),
        20,
    ))
}

/// A run against the mock: `rookery run` in `dir/ws` with `extra` flags; (code, stderr).
async fn run_on_mock(dir: &Path, mock: &Mock, extra: &[&str], prompt: &str) -> (i32, String) {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_rookery"));
    cmd.arg("run")
        .arg("--workspace")
        .arg(dir.join("ws"))
        .arg("--home")
        .arg(dir.join("home"))
        .args(["--provider", "openai", "--base-url", &mock.base_url])
        .args([
            "--model",
            "gpt-test",
            "--api-key-env",
            "ROOKERY_UNSET_KEY_VAR",
        ])
        .args(extra)
        .arg(prompt)
        .env("HOME", dir.join("user-home"))
        .env_remove("OPENAI_API_KEY")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    let out = tokio::time::timeout(Duration::from_secs(180), cmd.output())
        .await
        .expect("rookery run finished in time")
        .expect("rookery run started");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn temp_project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for sub in ["ws", "home", "user-home"] {
        std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
    }
    dir
}

/// Every record of the session's traces under `home`, in file order.
fn all_records(home: &Path) -> Vec<Value> {
    let mut files = trace_files(home);
    files.sort();
    files.iter().flat_map(|f| read_records(f)).collect()
}

/// `(event, decision, reason)` of the `hook_decision` records.
fn hook_decisions(records: &[Value]) -> Vec<(String, String, String)> {
    of_kind(records, "hook_decision")
        .into_iter()
        .map(|r| {
            let p = &r["payload"];
            let text = |k: &str| p[k].as_str().unwrap_or_default().to_string();
            (text("event"), text("decision"), text("reason"))
        })
        .collect()
}

/// The whole text of request `i` the model received.
fn sent(mock: &Mock, i: usize) -> String {
    mock.requests()
        .get(i)
        .map(|r| r["messages"].to_string())
        .unwrap_or_default()
}

/// The text of `log` once a hook wrote a whole line to it (a hook that runs beside the
/// session: its log is the event to wait for).
async fn wait_for_line(log: &Path) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.ends_with('\n') {
            return text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} never written",
            log.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The bash + jq prompt guard: blocks prompts holding a password, adds a ticket otherwise.
const PROMPT_GUARD: &str = r#"#!/bin/bash
input=$(cat)
prompt=$(echo "$input" | jq -r '.prompt')
event=$(echo "$input" | jq -r '.hook_event_name')
echo "$event|$prompt" >> "$CLAUDE_PROJECT_DIR/../prompts.log"
if [[ "$prompt" == *password* ]]; then
  jq -n '{decision: "block", reason: "prompts must not carry passwords"}'
  exit 0
fi
echo "ticket ABC-1 is open"
"#;

/// The python SessionStart hook: context in Claude Code's JSON shape.
const SESSION_START: &str = r#"#!/usr/bin/env python3
import json, sys
data = json.load(sys.stdin)
print(json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart",
    "additionalContext": "the build is green (%s)" % data["source"]}}))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_prompt_never_reaches_the_model_and_run_exits_1() {
    let dir = temp_project();
    let guard = hook_script(dir.path(), "guard.sh", PROMPT_GUARD);
    let file = settings(
        &dir.path().join("ws"),
        json!({"UserPromptSubmit": [group("", &guard)]}),
    );
    let mock = Mock::start(vec![answer("never")], None).await;
    let (code, stderr) = run_on_mock(
        dir.path(),
        &mock,
        &["--settings", s(&file)],
        "my password is hunter2",
    )
    .await;
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("prompts must not carry passwords"),
        "{stderr}"
    );
    assert!(mock.requests().is_empty(), "the model was asked");
    let log = std::fs::read_to_string(dir.path().join("prompts.log")).expect("hook ran");
    assert_eq!(log, "UserPromptSubmit|my password is hunter2\n");
    let records = all_records(&dir.path().join("home"));
    assert_eq!(
        hook_decisions(&records),
        [(
            "UserPromptSubmit".to_string(),
            "block".to_string(),
            "prompts must not carry passwords".to_string()
        )]
    );
    assert!(
        !records
            .iter()
            .any(|r| r.to_string().contains("my password is hunter2") && kind(r) == "text"),
        "the blocked prompt is not in the model's history"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_start_and_prompt_context_reach_the_model_and_session_end_runs() {
    let dir = temp_project();
    let guard = hook_script(dir.path(), "guard.sh", PROMPT_GUARD);
    let start = hook_script(dir.path(), "start.py", SESSION_START);
    let resume = hook_script(
        dir.path(),
        "resume.sh",
        "#!/bin/bash\ntouch \"$CLAUDE_PROJECT_DIR/../resume-ran\"\n",
    );
    let end = hook_script(
        dir.path(),
        "end.sh",
        "#!/bin/bash\njq -r '\"\\(.hook_event_name)|\\(.reason)\"' > \"$CLAUDE_PROJECT_DIR/../end.log\"\n",
    );
    let file = settings(
        &dir.path().join("ws"),
        json!({
            "UserPromptSubmit": [group("", &guard)],
            "SessionStart": [group("startup", &start), group("resume", &resume)],
            "SessionEnd": [group("", &end)]
        }),
    );
    let mock = Mock::start(vec![answer("fixed")], None).await;
    let (code, stderr) =
        run_on_mock(dir.path(), &mock, &["--settings", s(&file)], "fix the bug").await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(mock.requests().len(), 1);
    let first = sent(&mock, 0);
    for needle in [
        "fix the bug",
        "the build is green (startup)",
        "ticket ABC-1 is open",
    ] {
        assert!(first.contains(needle), "{needle} not sent: {first}");
    }
    // The prompt comes before the contexts the hooks added.
    assert!(first.find("fix the bug") < first.find("ticket ABC-1 is open"));
    assert!(
        !dir.path().join("resume-ran").exists(),
        "the resume matcher ran on startup"
    );
    let end = std::fs::read_to_string(dir.path().join("end.log")).expect("SessionEnd ran");
    assert_eq!(end, "SessionEnd|exit\n");
}

/// The node Stop hook: makes the task go on twice, logging `stop_hook_active`.
const STOP_TWICE: &str = r#"#!/usr/bin/env node
const fs = require('fs');
let d = '';
process.stdin.on('data', c => d += c);
process.stdin.on('end', () => {
  const input = JSON.parse(d);
  const log = process.env.CLAUDE_PROJECT_DIR + '/../stop.log';
  fs.appendFileSync(log, `${input.hook_event_name}|${input.stop_hook_active}\n`);
  const n = fs.readFileSync(log, 'utf8').trim().split('\n').length;
  if (n <= 2) {
    console.log(JSON.stringify({decision: 'block', reason: `run the tests (${n})`}));
  }
});
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_hook_makes_the_task_go_on_twice_then_it_stops() {
    let dir = temp_project();
    let stop = hook_script(dir.path(), "stop.js", STOP_TWICE);
    let file = settings(&dir.path().join("ws"), json!({"Stop": [group("", &stop)]}));
    let mock = Mock::start(
        vec![
            answer("one"),
            answer("two"),
            answer("three"),
            answer("four"),
        ],
        None,
    )
    .await;
    let (code, stderr) = run_on_mock(dir.path(), &mock, &["--settings", s(&file)], "work").await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(mock.requests().len(), 3, "{stderr}");
    assert!(
        sent(&mock, 1).contains("run the tests (1)"),
        "{}",
        sent(&mock, 1)
    );
    assert!(
        sent(&mock, 2).contains("run the tests (2)"),
        "{}",
        sent(&mock, 2)
    );
    let log = std::fs::read_to_string(dir.path().join("stop.log")).expect("Stop ran");
    assert_eq!(log, "Stop|false\nStop|true\nStop|true\n");
    let records = all_records(&dir.path().join("home"));
    let d = hook_decisions(&records);
    assert_eq!(
        d.iter()
            .map(|(e, d, r)| format!("{e} {d} {r}"))
            .collect::<Vec<_>>(),
        [
            "Stop continue run the tests (1)",
            "Stop continue run the tests (2)"
        ]
    );
    let ends = of_kind(&records, "task_end");
    assert_eq!(ends.len(), 1, "one task");
    assert_eq!(ends[0]["payload"]["status"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_continuations_are_capped_by_the_agent_config() {
    let dir = temp_project();
    // Hooks of the agent config get the new events too; this one always says go on.
    let cfg = dir.path().join("agent.yaml");
    std::fs::write(
        &cfg,
        "hooks_max_stop_continuations: 1\nhooks:\n  Stop:\n    - hooks:\n        - type: command\n          command: \"echo 'keep going' >&2; exit 2\"\n        - type: command\n          command: \"echo broken >&2; exit 3\"\n",
    )
    .expect("config");
    let mock = Mock::start(vec![answer("one"), answer("two"), answer("three")], None).await;
    let (code, stderr) = run_on_mock(dir.path(), &mock, &["--config", s(&cfg)], "work").await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(mock.requests().len(), 2, "one continuation only: {stderr}");
    assert!(sent(&mock, 1).contains("keep going"));
    let records = all_records(&dir.path().join("home"));
    let d: Vec<String> = hook_decisions(&records)
        .into_iter()
        .map(|(e, d, _)| format!("{e} {d}"))
        .collect();
    assert_eq!(d, ["Stop continue", "Stop continue_capped"]);
    // A failing hook has no opinion: a hook_error naming its event, at each check.
    let errors: Vec<(String, String)> = of_kind(&records, "hook_error")
        .into_iter()
        .map(|r| {
            let p = &r["payload"];
            (p["event"].to_string(), p["stderr"].to_string())
        })
        .collect();
    let one = ("\"Stop\"".to_string(), "\"broken\\n\"".to_string());
    assert_eq!(errors, [one.clone(), one]);
}

/// The python policy service: allows `echo allowed…`, denies `echo denied…`, no opinion else.
const PERMISSION: &str = r#"#!/usr/bin/env python3
import json, sys
data = json.load(sys.stdin)
cmd = data.get("tool_input", {}).get("command", "")
if data["hook_event_name"] != "PermissionRequest":
    sys.exit(1)
if cmd.startswith("echo allowed"):
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
        "decision": {"behavior": "allow"}}}))
elif cmd.startswith("echo denied"):
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
        "decision": {"behavior": "deny", "message": "not this one"}}}))
"#;

#[test]
fn permission_request_answers_under_always_ask_and_notification_hears_the_rest() {
    let sb = Sandbox::new();
    let permission = hook_script(sb.dir.path(), "permission.py", PERMISSION);
    let notify = hook_script(
        &sb.path(""),
        "notify.sh",
        "#!/bin/bash\njq -r '\"\\(.notification_type)|\\(.message)\"' >> \"$CLAUDE_PROJECT_DIR/../notify.log\"\n",
    );
    // A PreToolUse hook with no opinion: the call is still asked, and its records kept.
    let quiet = hook_script(sb.dir.path(), "quiet.sh", "#!/bin/bash\ncat > /dev/null\n");
    let file = settings(
        &sb.ws(),
        json!({
            "PreToolUse": [group("Bash", &quiet)],
            "PermissionRequest": [group("Bash", &permission)],
            "Notification": [group("permission_prompt", &notify), group("idle_prompt", &notify)]
        }),
    );
    let exec = |cmd: &str| json!({"name": "exec_command", "arguments": {"description": "run", "cmd": cmd}});
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [
            exec("echo allowed > allowed.txt"),
            exec("echo denied > denied.txt"),
            exec("echo asked > asked.txt")
        ]},
        {"text": "done"}
    ]}));
    let mut cmd = sb.command();
    cmd.arg("run")
        .arg("--workspace")
        .arg(sb.ws())
        .args(["--home", s(&sb.home())])
        .args(["--approve", "always-ask", "--script", s(&script)])
        .args(["--settings", s(&file), "go"]);
    let out = Running::spawn(cmd).wait(Duration::from_secs(120));
    out.expect_code(0);
    assert!(sb.ws().join("allowed.txt").exists(), "{}", out.stderr);
    assert!(!sb.ws().join("denied.txt").exists());
    assert!(!sb.ws().join("asked.txt").exists(), "no terminal: denied");
    let records = read_records(&sb.trace());
    check_pairing(&records, true);
    let decision = |id: &str| -> (String, String) {
        let d = of_kind(&records, "approval_decision")
            .into_iter()
            .find(|r| r["payload"]["tool_call_id"] == id)
            .map(|r| r["payload"].clone())
            .unwrap_or_default();
        (
            d["decision"].as_str().unwrap_or_default().into(),
            d["source"].as_str().unwrap_or_default().into(),
        )
    };
    assert_eq!(decision("call_0"), ("allow".into(), "hook".into()));
    assert_eq!(decision("call_1"), ("deny".into(), "hook".into()));
    assert_eq!(decision("call_2"), ("deny".into(), "user".into()));
    assert_eq!(
        output_of(&records, "call_1")["output"],
        "Tool call denied by PermissionRequest hook: not this one"
    );
    assert_eq!(
        hook_decisions(&records),
        [
            ("PermissionRequest".into(), "allow".into(), String::new()),
            (
                "PermissionRequest".into(),
                "deny".into(),
                "not this one".into()
            ),
        ]
    );
    // Only the call that was really asked was announced, once (the idle matcher is not it).
    let log = std::fs::read_to_string(sb.path("notify.log")).expect("Notification ran");
    assert_eq!(
        log,
        "permission_prompt|Rookery needs your permission to use exec_command\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_422_prompt_blocked_and_runs_pre_compact() {
    let dir = sandbox(&json!({"turns": [
        {"text": "first answer"},
        {"text": "[summary]the user said hello[/summary]"}
    ]}));
    let guard = hook_script(dir.path(), "guard.sh", PROMPT_GUARD);
    let compact = hook_script(
        dir.path(),
        "compact.sh",
        "#!/bin/bash\njq -r '\"\\(.hook_event_name)|\\(.trigger)|\\(.custom_instructions)\"' >> \"$CLAUDE_PROJECT_DIR/../compact.log\"\n",
    );
    let start = hook_script(
        dir.path(),
        "start.sh",
        "#!/bin/bash\njq -r '\"\\(.hook_event_name)|\\(.source)\"' >> \"$CLAUDE_PROJECT_DIR/../start.log\"\n",
    );
    let file = settings(
        &dir.path().join("ws"),
        json!({
            "UserPromptSubmit": [group("", &guard)],
            "PreCompact": [group("manual", &compact), group("auto", &compact)],
            "SessionStart": [group("compact", &start)]
        }),
    );
    let file = file.display().to_string();
    let server = Server::start_with(dir, None, &["--settings", &file]);
    let id = server.create(None).await;
    for path in ["tasks", "steer"] {
        let (status, v) = server
            .call(
                "POST",
                &format!("/v1/sessions/{id}/{path}"),
                Some(json!({"text": "the password is hunter2"})),
            )
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{path}: {v}");
        assert_eq!(v["error"]["code"], "prompt_blocked", "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("prompts must not carry passwords"),
            "{v}"
        );
    }
    let after = server.task(&id, "hello").await;
    let events = server.events_until_task_end(&id, after).await;
    assert!(
        events
            .iter()
            .any(|(_, m)| m.to_string().contains("first answer")),
        "{events:?}"
    );
    let (status, v) = server
        .call("POST", &format!("/v1/sessions/{id}/compact"), None)
        .await;
    assert!(status.is_success(), "{v}");
    // Both run beside the compaction: waited for by their logs.
    assert_eq!(
        wait_for_line(&server.dir.path().join("compact.log")).await,
        "PreCompact|manual|\n"
    );
    assert_eq!(
        wait_for_line(&server.dir.path().join("start.log")).await,
        "SessionStart|compact\n"
    );
    let prompts = std::fs::read_to_string(server.dir.path().join("prompts.log")).expect("log");
    assert_eq!(
        prompts,
        "UserPromptSubmit|the password is hunter2\nUserPromptSubmit|the password is hunter2\nUserPromptSubmit|hello\n"
    );
}

#[test]
fn a_subagent_stop_hook_makes_the_child_go_on_once() {
    let sb = Sandbox::new();
    let stop = hook_script(
        sb.dir.path(),
        "substop.sh",
        r#"#!/bin/bash
input=$(cat)
log="$CLAUDE_PROJECT_DIR/../substop.log"
echo "$input" | jq -r '"\(.hook_event_name)|\(.stop_hook_active)"' >> "$log"
if [ "$(wc -l < "$log")" -eq 1 ]; then
  jq -n '{decision: "block", reason: "check your work"}'
fi
"#,
    );
    let file = settings(&sb.ws(), json!({"SubagentStop": [group("", &stop)]}));
    let script = sb.script(&json!({
        "turns": [
            {"tool_calls": [{"name": "run_subagent", "arguments": {"description": "delegate", "prompt": "child: work", "yield_time_ms": 60000}}]},
            {"text": "done"}
        ],
        "children": [{"when_prompt_contains": "child", "turns": [
            {"text": "child one"},
            {"text": "child two"}
        ]}]
    }));
    let mut cmd = sb.command();
    cmd.arg("run")
        .arg("--workspace")
        .arg(sb.ws())
        .args(["--home", s(&sb.home()), "--script", s(&script)])
        .args(["--settings", s(&file), "go"]);
    let out = Running::spawn(cmd).wait(Duration::from_secs(120));
    out.expect_code(0);
    // Only the child's end is a SubagentStop; the root has no Stop hook.
    let log = std::fs::read_to_string(sb.path("substop.log")).expect("SubagentStop ran");
    assert_eq!(log, "SubagentStop|false\nSubagentStop|true\n");
    let records = all_records(&sb.home());
    assert_eq!(
        hook_decisions(&records),
        [(
            "SubagentStop".to_string(),
            "continue".to_string(),
            "check your work".to_string()
        )]
    );
    assert!(
        records.iter().any(|r| r
            .to_string()
            .contains("Stop hook feedback:\\ncheck your work")),
        "the reason reached the child as input"
    );
}

#[test]
fn chat_prints_a_blocked_prompt_and_goes_on() {
    let sb = Sandbox::new();
    let guard = hook_script(sb.dir.path(), "guard.sh", PROMPT_GUARD);
    let file = settings(&sb.ws(), json!({"UserPromptSubmit": [group("", &guard)]}));
    let script = sb.script(&json!({"turns": [{"text": "the only answer"}]}));
    let mut cmd = sb.command();
    cmd.args(["chat", "--workspace", s(&sb.ws()), "--home", s(&sb.home())])
        .args(["--script", s(&script), "--settings", s(&file)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn chat");
    std::io::Write::write_all(
        &mut child.stdin.take().expect("stdin"),
        b"my password is x\nhello\n",
    )
    .expect("write lines");
    let out = child.wait_with_output().expect("chat ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(
            "prompt blocked by a UserPromptSubmit hook: prompts must not carry passwords"
        ),
        "{stderr}"
    );
    // The next line got the one scripted answer: the blocked one never reached the model (it
    // would have used it up, and `hello` would get the script's end).
    assert!(stdout.lines().any(|l| l == "the only answer"), "{stdout}");
    assert!(!stdout.contains("script finished"), "{stdout}");
}

#[test]
fn session_start_says_resume_when_chat_resumes_a_session() {
    let sb = Sandbox::new();
    let start = hook_script(
        sb.dir.path(),
        "start.sh",
        "#!/bin/bash\nsrc=$(jq -r .source)\necho \"$src\" >> \"$CLAUDE_PROJECT_DIR/../start.log\"\necho \"started from $src\"\n",
    );
    let file = settings(&sb.ws(), json!({"SessionStart": [group("*", &start)]}));
    let script =
        sb.script(&json!({"turns": [{"text": "first answer"}, {"text": "second answer"}]}));
    let chat = |args: &[&str], line: &str| -> String {
        let mut cmd = sb.command();
        cmd.args(["chat", "--workspace", s(&sb.ws()), "--home", s(&sb.home())])
            .args(args)
            .args(["--settings", s(&file)])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn chat");
        std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), line.as_bytes())
            .expect("write line");
        let out = child.wait_with_output().expect("chat ran");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    let out = chat(&["--script", s(&script)], "hello\n");
    let id = out
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("rookery chat --resume "))
        .expect("the resume line")
        .to_string();
    let out = chat(&["--resume", &id], "again\n");
    assert!(out.lines().any(|l| l == "second answer"), "{out}");
    let log = std::fs::read_to_string(sb.path("start.log")).expect("SessionStart ran");
    assert_eq!(log, "startup\nresume\n");
    // Each context reached the model's input, after its task's prompt.
    let texts: Vec<String> = all_records(&sb.home())
        .iter()
        .filter(|r| kind(r) == "text" && r["payload"]["role"] == "user")
        .map(|r| {
            r["payload"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(
        texts,
        [
            "hello",
            "[SessionStart hook context]\nstarted from startup",
            "again",
            "[SessionStart hook context]\nstarted from resume"
        ]
    );
}
