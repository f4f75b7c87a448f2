//! Helpers of the background-command integration tests: a supervisor over a temp workspace with
//! an empty HOME (bash -lc then skips slow login files), running a tool through the real
//! close-out, and `/proc` probes for process groups and zombies.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use regex::Regex;
use rookery::actors::command_supervisor::tools::CommandTools;
use rookery::actors::command_supervisor::{
    CommandEvent, CommandOptions, CommandSupervisorHandle, MAX_COMMANDS,
};
use rookery::message::{ModelPayload, OmniMessage, Payload, StopReason};
use rookery::process::{group_members, proc_stat};
use rookery::tools::close_out::{ToolCallInfo, execute};
use rookery::tools::profile::penguin::{builtin_binding, default_definition};
use rookery::tools::{
    Permission, RegisteredTool, ServiceKind, ToolBinding, ToolDefinitionConfig, ToolEnv,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub handle: CommandSupervisorHandle,
    pub events: mpsc::UnboundedReceiver<CommandEvent>,
}

pub async fn harness() -> Harness {
    harness_with(MAX_COMMANDS).await
}

pub async fn harness_with(capacity: usize) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let (tx, events) = mpsc::unbounded_channel();
    let sink = Arc::new(move |e: CommandEvent| {
        let _ = tx.send(e);
    });
    let options = CommandOptions {
        capacity,
        env: vec![("HOME".into(), home.display().to_string())],
        ..CommandOptions::default()
    };
    let handle = CommandSupervisorHandle::spawn_with(
        "session-test".into(),
        dir.path().to_path_buf(),
        sink,
        None,
        options,
    )
    .await
    .unwrap();
    Harness {
        dir,
        handle,
        events,
    }
}

/// A finished call: its output, verdict and the text deltas in order.
#[derive(Debug)]
pub struct Out {
    pub output: String,
    pub stop: StopReason,
    pub deltas: Vec<String>,
}

fn definition(name: &str) -> ToolDefinitionConfig {
    default_definition(name).unwrap_or_else(|| {
        ToolDefinitionConfig::new(
            name,
            "list background commands",
            json!({"type": "object"}),
            Permission::Read,
        )
    })
}

/// The registry's binding of a command tool (always the command supervisor's service).
fn binding(name: &str) -> ToolBinding {
    let binding = builtin_binding(name).unwrap_or_else(|| panic!("no tool {name}"));
    assert_eq!(binding.service(), Some(&ServiceKind::Commands), "{name}");
    binding
}

/// Runs one call through the close-out, with `max_output_length` overridden when given.
pub async fn call_with(
    commands: Option<(CommandSupervisorHandle, std::path::PathBuf)>,
    name: &str,
    args: Value,
    max_output: Option<i64>,
    on_delta: Option<mpsc::UnboundedSender<String>>,
) -> Out {
    call_full(
        commands,
        name,
        args,
        max_output,
        on_delta,
        CancellationToken::new(),
    )
    .await
}

/// [`call_with`] with the user's cancel token.
pub async fn call_full(
    commands: Option<(CommandSupervisorHandle, std::path::PathBuf)>,
    name: &str,
    args: Value,
    max_output: Option<i64>,
    on_delta: Option<mpsc::UnboundedSender<String>>,
    cancel: CancellationToken,
) -> Out {
    let mut def = definition(name);
    if let Some(m) = max_output {
        def.max_output_length = m;
    }
    let registered = RegisteredTool {
        definition: Arc::new(def),
        binding: binding(name),
        wrappers: Vec::new(),
    };
    let seen: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let emit = Arc::new(move |m: OmniMessage| {
        if let Payload::Model(ModelPayload::PartialToolCallOutput { output, .. }) = &m.payload
            && !output.is_empty()
        {
            if let Some(tx) = &on_delta {
                let _ = tx.send(output.clone());
            }
            sink.lock().unwrap().push(output.clone());
        }
    });
    let (commands, workspace) = match commands {
        Some((c, w)) => (Some(c), w),
        None => (None, std::env::temp_dir()),
    };
    // Bound the way the session binds it: to the (possibly absent) supervisor.
    let tool = registered.bind(|_| Arc::new(CommandTools::new(commands)));
    let env = ToolEnv {
        workspace,
        path_ticket: None,
        scope: Default::default(),
        otel: Default::default(),
    };
    let info = ToolCallInfo {
        tool_call_id: "call_1".into(),
        name: name.into(),
        arguments: args.to_string(),
    };
    let complete = execute(info, Some(tool), env, cancel, emit).await;
    let Payload::Model(ModelPayload::ToolCallOutput {
        output,
        stop_reason,
        ..
    }) = complete.payload
    else {
        panic!("not a tool_call_output: {complete:?}");
    };
    let deltas = seen.lock().unwrap().clone();
    assert_eq!(deltas.concat(), output, "deltas must add up to the output");
    Out {
        output,
        stop: stop_reason,
        deltas,
    }
}

impl Harness {
    pub async fn call(&self, name: &str, args: Value) -> Out {
        call_with(self.commands(), name, args, None, None).await
    }

    /// The handle and workspace for [`call_with`].
    pub fn commands(&self) -> Option<(CommandSupervisorHandle, std::path::PathBuf)> {
        Some((self.handle.clone(), self.dir.path().to_path_buf()))
    }

    pub fn workspace(&self) -> String {
        self.dir.path().display().to_string()
    }

    /// The next event, waiting up to 20 s.
    pub async fn next_event(&mut self) -> CommandEvent {
        tokio::time::timeout(Duration::from_secs(20), self.events.recv())
            .await
            .expect("an event within 20 s")
            .expect("sink open")
    }
}

/// Starts `cmd` with `run_in_background` and returns its process_id.
pub async fn start_bg(h: &Harness, cmd: &str) -> String {
    let r = h
        .call(
            "exec_command",
            json!({"cmd": cmd, "run_in_background": true}),
        )
        .await;
    process_id(&r.output)
}

/// The process_id named in a tool output.
pub fn process_id(text: &str) -> String {
    let re = Regex::new(r"process_id (proc-[0-9a-f]{8})").unwrap();
    re.captures(text)
        .unwrap_or_else(|| panic!("no process_id in {text:?}"))[1]
        .to_string()
}

/// Polls `cond` every 10 ms until it holds; panics after `limit`.
pub async fn eventually(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// True when process group `pgid` has no live member and its leader is not a zombie of ours.
pub fn group_gone(pgid: i32) -> bool {
    group_members(pgid).is_empty() && proc_stat(pgid).is_none_or(|(_, _, pgrp)| pgrp != pgid)
}

/// Live (non-zombie) processes whose command line is exactly `argv`.
pub fn live_with_cmdline(argv: &[&str]) -> Vec<i32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| a.bytes().chain(std::iter::once(0)))
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want)
                && proc_stat(*pid).is_some_and(|(s, _, _)| s != 'Z')
        })
        .collect()
}

/// Zombie children of this test process.
pub fn our_zombies() -> Vec<i32> {
    let me = std::process::id() as i32;
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| proc_stat(*pid).is_some_and(|(s, ppid, _)| s == 'Z' && ppid == me))
        .collect()
}

/// The first number after `prefix` in `text`.
pub fn number_after(text: &str, prefix: &str) -> i32 {
    let re = Regex::new(&format!("{}(\\d+)", regex::escape(prefix))).unwrap();
    re.captures(text)
        .unwrap_or_else(|| panic!("no {prefix}N in {text:?}"))[1]
        .parse()
        .unwrap()
}
