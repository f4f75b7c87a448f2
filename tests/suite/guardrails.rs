//! Guardrails through the library session with the scripted model and real hook scripts (bash
//! and python3): PreToolUse deny (exit 2, JSON), rewrite, ask, allow, PostToolUse context,
//! timeouts, malformed output, parallel hooks, subagents, and the command policy beating
//! allow-all and an allowing hook.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use futures::future::BoxFuture;
use rookery::approval::{ApprovalMode, ApprovalRequest, Approver, PolicyApprover};
use rookery::hooks::HooksConfig;
use rookery::message::{Decision, EventPayload, ModelPayload, StopReason};
use rookery::{Host, OmniMessage, SessionOptions};
use serde_json::{Value, json};

/// Writes an executable hook script and returns its path.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    let mut perm = std::fs::metadata(&p).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&p, perm).unwrap();
    p
}

fn hooks(v: Value) -> Arc<HooksConfig> {
    Arc::new(HooksConfig::from_value(v, rookery::hooks::HookView::Rookery).unwrap())
}

fn pre(matcher: &str, commands: &[(&Path, f64)]) -> Value {
    let hs: Vec<Value> = commands
        .iter()
        .map(|(c, t)| json!({"type": "command", "command": c.display().to_string(), "timeout": t}))
        .collect();
    json!({"matcher": matcher, "hooks": hs})
}

fn exec(cmd: &str) -> Value {
    json!({"name": "exec_command", "arguments": {"description": "run", "cmd": cmd}})
}

fn one_call(call: Value) -> Arc<rookery::model::scripted::ScriptedModel> {
    scripted(json!({"turns": [{"tool_calls": [call]}, {"text": "done"}]}))
}

/// Runs one task and returns the trace.
async fn run(home: &Path, options: SessionOptions) -> Vec<OmniMessage> {
    let host = Host::start(home).await.unwrap();
    let s = host.create_session(options).await.unwrap();
    let summary = s.run_task("go").await.unwrap();
    assert_eq!(summary.status, StopReason::Completed);
    s.close().await.unwrap();
    trace_records(s.trace_path())
}

fn decision(records: &[OmniMessage]) -> (Decision, Option<String>, Option<String>) {
    let ds: Vec<_> = records
        .iter()
        .filter_map(|r| match r.as_event() {
            Some(EventPayload::ApprovalDecision {
                decision,
                source,
                reason,
                ..
            }) => Some((*decision, source.clone(), reason.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(ds.len(), 1, "{ds:?}");
    ds[0].clone()
}

fn output(records: &[OmniMessage]) -> (String, StopReason) {
    let outs: Vec<_> = records
        .iter()
        .filter_map(|r| match r.as_model() {
            Some(ModelPayload::ToolCallOutput {
                output,
                stop_reason,
                ..
            }) => Some((output.clone(), *stop_reason)),
            _ => None,
        })
        .collect();
    assert_eq!(outs.len(), 1, "{outs:?}");
    outs[0].clone()
}

fn hook_errors(records: &[OmniMessage]) -> Vec<(String, Option<i32>, String)> {
    records
        .iter()
        .filter_map(|r| match r.as_event() {
            Some(EventPayload::HookError {
                command,
                exit_code,
                stderr,
                ..
            }) => Some((command.clone(), *exit_code, stderr.clone())),
            _ => None,
        })
        .collect()
}

fn with_hooks(
    ws: &Path,
    model: Arc<dyn rookery::model::Model>,
    h: Arc<HooksConfig>,
) -> SessionOptions {
    let mut o = options(ws, model);
    o.config.hooks = h;
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_tool_use_exit_2_blocks_with_the_stderr_reason() {
    let (d, ws, home) = tempdirs();
    let hook = script(
        d.path(),
        "deny.sh",
        "#!/bin/bash\ncat > /dev/null\necho 'no commands today' >&2\nexit 2\n",
    );
    let o = with_hooks(
        &ws,
        one_call(exec("touch ran.txt")),
        hooks(json!({"PreToolUse": [pre("exec_command|bash", &[(&hook, 30.0)])]})),
    );
    let recs = run(&home, o).await;
    assert_eq!(
        output(&recs),
        (
            "Tool call blocked by PreToolUse hook: no commands today".to_string(),
            StopReason::Aborted
        )
    );
    assert_eq!(
        decision(&recs),
        (
            Decision::Deny,
            Some("hook".into()),
            Some("no commands today".into())
        )
    );
    assert!(!ws.join("ran.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_tool_use_json_deny_from_python_and_the_stdin_protocol() {
    let (d, ws, home) = tempdirs();
    let seen = d.path().join("seen.json");
    let body = format!(
        "#!/usr/bin/env python3\nimport json, sys\ndata = json.load(sys.stdin)\nopen({seen:?}, 'w').write(json.dumps(data))\nprint(json.dumps({{'hookSpecificOutput': {{'hookEventName': 'PreToolUse', 'permissionDecision': 'deny', 'permissionDecisionReason': 'python says no: ' + data['tool_input']['cmd']}}}}))\n",
        seen = seen.display().to_string()
    );
    let hook = script(d.path(), "deny.py", &body);
    let o = with_hooks(
        &ws,
        one_call(exec("touch ran.txt")),
        hooks(json!({"PreToolUse": [pre("exec_.*", &[(&hook, 30.0)])]})),
    );
    let recs = run(&home, o).await;
    assert_eq!(
        output(&recs).0,
        "Tool call blocked by PreToolUse hook: python says no: touch ran.txt"
    );
    assert!(!ws.join("ran.txt").exists());
    let input: Value = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(input["hook_event_name"], "PreToolUse");
    assert_eq!(input["tool_name"], "exec_command");
    assert_eq!(input["tool_use_id"], "call_0");
    assert_eq!(input["permission_mode"], "allow-all");
    assert_eq!(input["cwd"], ws.display().to_string());
    assert!(
        input["transcript_path"]
            .as_str()
            .unwrap()
            .ends_with(".jsonl")
    );
    assert!(input["session_id"].as_str().is_some_and(|s| !s.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updated_input_runs_the_call_with_the_new_arguments() {
    let (d, ws, home) = tempdirs();
    let hook = script(
        d.path(),
        "rewrite.py",
        "#!/usr/bin/env python3\nimport json, sys\ndata = json.load(sys.stdin)\nargs = dict(data['tool_input'])\nargs['cmd'] = 'echo rewritten > out.txt'\nprint(json.dumps({'hookSpecificOutput': {'permissionDecision': 'allow', 'updatedInput': args}}))\n",
    );
    let o = with_hooks(
        &ws,
        one_call(exec("echo original > out.txt")),
        hooks(json!({"PreToolUse": [pre("", &[(&hook, 30.0)])]})),
    );
    let recs = run(&home, o).await;
    assert_eq!(
        std::fs::read_to_string(ws.join("out.txt")).unwrap(),
        "rewritten\n"
    );
    let rewrite: Vec<_> = recs
        .iter()
        .filter_map(|r| match r.as_event() {
            Some(EventPayload::HookRewrite {
                original_arguments,
                arguments,
                command,
                ..
            }) => Some((
                original_arguments.clone(),
                arguments.clone(),
                command.clone(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(rewrite.len(), 1);
    let orig: Value = serde_json::from_str(&rewrite[0].0).unwrap();
    let new: Value = serde_json::from_str(&rewrite[0].1).unwrap();
    assert_eq!(orig["cmd"], "echo original > out.txt");
    assert_eq!(new["cmd"], "echo rewritten > out.txt");
    assert_eq!(rewrite[0].2, hook.display().to_string());
    assert_eq!(decision(&recs).1.as_deref(), Some("hook"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_object_updated_input_is_recorded_as_a_hook_error() {
    let (d, ws, home) = tempdirs();
    let hook = script(
        d.path(),
        "stringy.py",
        "#!/usr/bin/env python3\nimport json, sys\nsys.stdin.read()\nprint(json.dumps({'hookSpecificOutput': {'updatedInput': 'echo rewritten > out.txt'}}))\n",
    );
    let o = with_hooks(
        &ws,
        one_call(exec("echo original > out.txt")),
        hooks(json!({"PreToolUse": [pre("", &[(&hook, 30.0)])]})),
    );
    let recs = run(&home, o).await;
    // The call runs with its own arguments.
    assert_eq!(
        std::fs::read_to_string(ws.join("out.txt")).unwrap(),
        "original\n"
    );
    let errs = hook_errors(&recs);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].0, hook.display().to_string());
    assert_eq!(errs[0].1, Some(0));
    assert!(
        errs[0]
            .2
            .contains("updatedInput must be a JSON object, got a string"),
        "{errs:?}"
    );
    assert!(
        !recs
            .iter()
            .any(|r| matches!(r.as_event(), Some(EventPayload::HookRewrite { .. }))),
        "nothing was rewritten"
    );
}

/// Records what it is asked and answers `answer`.
#[derive(Clone)]
struct Asker {
    asked: Arc<Mutex<Vec<String>>>,
    answer: Decision,
}

impl Approver for Asker {
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Decision> {
        self.asked.lock().unwrap().push(request.tool_call_id);
        let d = self.answer;
        Box::pin(async move { d })
    }
}

fn asker(answer: Decision) -> Asker {
    Asker {
        asked: Arc::new(Mutex::new(Vec::new())),
        answer,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_under_allow_all_goes_to_the_approver() {
    let (d, ws, home) = tempdirs();
    let hook = script(
        d.path(),
        "ask.sh",
        "#!/bin/bash\ncat > /dev/null\necho '{\"hookSpecificOutput\": {\"permissionDecision\": \"ask\", \"permissionDecisionReason\": \"double-check\"}}'\n",
    );
    let a = asker(Decision::Deny);
    let mut o = with_hooks(
        &ws,
        one_call(exec("touch ran.txt")),
        hooks(json!({"PreToolUse": [pre("*", &[(&hook, 30.0)])]})),
    );
    o.approver = Arc::new(PolicyApprover::new(
        ApprovalMode::AllowAll,
        Arc::new(a.clone()),
    ));
    let recs = run(&home, o).await;
    assert_eq!(*a.asked.lock().unwrap(), ["call_0"]);
    assert_eq!(
        decision(&recs),
        (
            Decision::Deny,
            Some("user".into()),
            Some("double-check".into())
        )
    );
    assert_eq!(output(&recs).0, "Tool call denied by user.");
    assert!(!ws.join("ran.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_skips_an_always_ask_prompt() {
    let (d, ws, home) = tempdirs();
    let hook = script(
        d.path(),
        "allow.sh",
        "#!/bin/bash\ncat > /dev/null\necho '{\"hookSpecificOutput\": {\"permissionDecision\": \"allow\", \"permissionDecisionReason\": \"trusted\"}}'\n",
    );
    let a = asker(Decision::Deny);
    let mut o = with_hooks(
        &ws,
        one_call(exec("touch ran.txt")),
        hooks(json!({"PreToolUse": [pre("exec_command", &[(&hook, 30.0)])]})),
    );
    o.approver = Arc::new(PolicyApprover::new(
        ApprovalMode::AlwaysAsk,
        Arc::new(a.clone()),
    ));
    let recs = run(&home, o).await;
    assert!(a.asked.lock().unwrap().is_empty());
    assert_eq!(
        decision(&recs),
        (Decision::Allow, Some("hook".into()), Some("trusted".into()))
    );
    assert!(ws.join("ran.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_tool_use_context_reaches_the_next_request() {
    let (d, ws, home) = tempdirs();
    let ctx = script(
        d.path(),
        "ctx.py",
        "#!/usr/bin/env python3\nimport json, sys\ndata = json.load(sys.stdin)\nr = data['tool_response']\nprint(json.dumps({'hookSpecificOutput': {'hookEventName': 'PostToolUse', 'additionalContext': 'saw %s/%s' % (r['output'].strip(), r['stop_reason'])}}))\n",
    );
    let block = script(
        d.path(),
        "block.sh",
        "#!/bin/bash\ncat > /dev/null\necho '{\"decision\": \"block\", \"reason\": \"run the tests next\"}'\n",
    );
    let model = Recording::new(one_call(exec("echo hello")));
    let h = hooks(json!({"PostToolUse": [
        {"matcher": "exec_command", "hooks": [
            {"type": "command", "command": ctx.display().to_string()},
            {"type": "command", "command": block.display().to_string()}]}
    ]}));
    let recs = run(&home, with_hooks(&ws, model.clone(), h)).await;
    let reqs = model.requests();
    assert_eq!(reqs.len(), 2);
    let outs = outputs(&reqs[1]);
    let text = &outs.last().unwrap().0;
    assert!(
        text.ends_with("\n\nsaw hello/completed\n\nrun the tests next"),
        "{text:?}"
    );
    assert!(text.starts_with("hello"), "{text:?}");
    assert_eq!(&output(&recs).0, text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_past_its_timeout_is_killed_and_the_call_proceeds() {
    let (d, ws, home) = tempdirs();
    let pidfile = d.path().join("hook.pid");
    let hook = script(
        d.path(),
        "slow.sh",
        &format!(
            "#!/bin/bash\nsleep 300 &\necho $! > {}\nwait\n",
            pidfile.display()
        ),
    );
    let o = with_hooks(
        &ws,
        one_call(exec("touch ran.txt")),
        hooks(json!({"PreToolUse": [pre("*", &[(&hook, 3.0)])]})),
    );
    let recs = run(&home, o).await;
    assert!(ws.join("ran.txt").exists());
    let errs = hook_errors(&recs);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].2.contains("timed out"), "{errs:?}");
    assert_eq!(decision(&recs).1.as_deref(), Some("mode"));
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the hook's child {pid} survived"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_and_other_exits_are_non_blocking_errors() {
    let (d, ws, home) = tempdirs();
    let bad = script(
        d.path(),
        "bad.sh",
        "#!/bin/bash\ncat > /dev/null\necho '{\"hookSpecificOutput\": '\n",
    );
    let one = script(
        d.path(),
        "one.py",
        "#!/usr/bin/env python3\nimport sys\nsys.stdin.read()\nsys.stderr.write('py broke')\nsys.exit(1)\n",
    );
    let o = with_hooks(
        &ws,
        one_call(exec("touch ran.txt")),
        hooks(json!({"PreToolUse": [pre("*", &[(&bad, 30.0), (&one, 30.0)])]})),
    );
    let recs = run(&home, o).await;
    assert!(ws.join("ran.txt").exists());
    let errs = hook_errors(&recs);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert_eq!(errs[0].1, Some(0));
    assert!(errs[0].2.contains("invalid JSON"), "{errs:?}");
    assert_eq!(
        errs[1],
        (one.display().to_string(), Some(1), "py broke".to_string())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_run_in_parallel_and_deny_wins() {
    let (d, ws, home) = tempdirs();
    let dir = d.path().display().to_string();
    // Each waits for the other's marker: only parallel hooks both get past the wait.
    let waiter = |me: &str, other: &str, out: &str| {
        format!(
            "#!/bin/bash\ncat > /dev/null\ntouch {dir}/{me}\nfor i in $(seq 1 400); do [ -e {dir}/{other} ] && break; sleep 0.05; done\n[ -e {dir}/{other} ] || exit 1\n{out}\n"
        )
    };
    let allow = script(
        d.path(),
        "a.sh",
        &waiter(
            "a",
            "b",
            "echo '{\"hookSpecificOutput\": {\"permissionDecision\": \"allow\"}}'",
        ),
    );
    let deny = script(
        d.path(),
        "b.sh",
        &waiter("b", "a", "echo 'denied in parallel' >&2; exit 2"),
    );
    let ask = script(
        d.path(),
        "c.sh",
        "#!/bin/bash\ncat > /dev/null\necho '{\"hookSpecificOutput\": {\"permissionDecision\": \"ask\"}}'\n",
    );
    let o = with_hooks(
        &ws,
        one_call(exec("touch ran.txt")),
        hooks(json!({"PreToolUse": [
            pre("exec_command", &[(&allow, 60.0)]),
            pre(".*", &[(&deny, 60.0), (&ask, 60.0)])
        ]})),
    );
    let recs = run(&home, o).await;
    assert!(hook_errors(&recs).is_empty(), "{:?}", hook_errors(&recs));
    assert_eq!(
        decision(&recs),
        (
            Decision::Deny,
            Some("hook".into()),
            Some("denied in parallel".into())
        )
    );
    assert!(!ws.join("ran.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagents_calls_are_hooked() {
    let (d, ws, home) = tempdirs();
    let hook = script(
        d.path(),
        "deny.sh",
        "#!/bin/bash\ncat > /dev/null\necho 'not in children' >&2\nexit 2\n",
    );
    let model = scripted(json!({
        "turns": [
            {"tool_calls": [{"name": "run_subagent", "arguments": {"description": "delegate", "prompt": "child: touch", "yield_time_ms": 60000}}]},
            {"text": "done"}
        ],
        "children": [{"when_prompt_contains": "child", "turns": [
            {"tool_calls": [exec("touch child.txt")]},
            {"text": "child done"}
        ]}]
    }));
    let o = with_hooks(
        &ws,
        model,
        hooks(json!({"PreToolUse": [pre("exec_command", &[(&hook, 30.0)])]})),
    );
    run(&home, o).await;
    assert!(!ws.join("child.txt").exists());
    let mut found = false;
    for day in std::fs::read_dir(home.join("traces")).unwrap() {
        for f in std::fs::read_dir(day.unwrap().path()).unwrap() {
            let recs = trace_records(f.unwrap().path());
            let blocked = recs.iter().any(|r| {
                matches!(r.as_model(), Some(ModelPayload::ToolCallOutput { output, .. })
                    if output == "Tool call blocked by PreToolUse hook: not in children")
            });
            found |= blocked;
        }
    }
    assert!(found, "the child's call was not blocked by the hook");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_beats_allow_all_and_an_allowing_hook() {
    let (d, ws, home) = tempdirs();
    let marker = d.path().join("hook-ran");
    let hook = script(
        d.path(),
        "allow.sh",
        &format!(
            "#!/bin/bash\ncat >> {}\necho >> {0}\necho '{{\"hookSpecificOutput\": {{\"permissionDecision\": \"allow\"}}}}'\n",
            marker.display()
        ),
    );
    // Harmless if it ever ran: `false` stops the chain before rm.
    let model = scripted(json!({"turns": [{"tool_calls": [
        exec("touch ran.txt; false && rm -rf /"),
        {"name": "input_command", "arguments": {"description": "type", "process_id": "1", "chars": "bash -c 'false && rm -rf ~'\n"}},
        exec("touch ok.txt")
    ]}, {"text": "done"}]}));
    let o = with_hooks(
        &ws,
        model,
        hooks(json!({"PreToolUse": [pre("*", &[(&hook, 30.0)])]})),
    );
    let recs = run(&home, o).await;
    assert!(!ws.join("ran.txt").exists());
    assert!(ws.join("ok.txt").exists());
    let decisions: Vec<_> = recs
        .iter()
        .filter_map(|r| match r.as_event() {
            Some(EventPayload::ApprovalDecision {
                decision,
                source,
                reason,
                ..
            }) => Some((*decision, source.clone(), reason.clone())),
            _ => None,
        })
        .collect();
    let forbidden = (
        Decision::Forbidden,
        Some("policy".to_string()),
        Some("rm-recursive-force".to_string()),
    );
    assert_eq!(decisions[0], forbidden);
    assert_eq!(decisions[1], forbidden);
    assert_eq!(decisions[2].0, Decision::Allow);
    let outs: Vec<String> = recs
        .iter()
        .filter_map(|r| match r.as_model() {
            Some(ModelPayload::ToolCallOutput { output, .. }) => Some(output.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(outs[0], "Tool call denied by policy.");
    assert_eq!(outs[1], "Tool call denied by policy.");
    // The hook ran only for the allowed call (the policy comes first).
    let seen = std::fs::read_to_string(&marker).unwrap();
    let inputs: Vec<Value> = seen
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(inputs.len(), 1, "{seen}");
    assert_eq!(inputs[0]["tool_use_id"], "call_2");
}

#[tokio::test]
async fn a_served_inline_config_may_not_carry_hooks() {
    let inline = json!({"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "touch /tmp/x"}]}]}});
    let Err(e) = rookery::server::session_config::resolve(inline, None, None).await else {
        panic!("inline hooks are refused");
    };
    assert_eq!(e.code, "invalid_config");
    assert!(e.message.contains("hooks"), "{}", e.message);
    let Ok(ok) = rookery::server::session_config::resolve(
        json!({"commands": {"policy": {"disable": ["mkfs"]}}}),
        None,
        None,
    )
    .await
    else {
        panic!("a policy is accepted inline");
    };
    assert_eq!(ok.command_policy.check("mkfs /dev/sda"), None);
    assert_eq!(
        ok.command_policy.check("rm -rf /"),
        Some("rm-recursive-force")
    );
}
