//! Background commands end to end: the four command tools through the real close-out, a real
//! `CommandSupervisor` and real `bash` processes (HOME points at an empty directory). Waits are
//! on events and conditions, never on fixed sleeps.

use crate::common::commands as support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use regex::Regex;
use rookery::actors::command_supervisor::CommandEvent;
use rookery::actors::command_supervisor::notice::completion_notice;
use rookery::message::StopReason;
use rookery::process::ExitInfo;
use rookery::process::proc_stat;
use serde_json::json;
use support::*;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const LONG: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn true_returns_fast_and_exit_codes_and_signals() {
    let h = harness().await;
    let start = Instant::now();
    let r = h.call("exec_command", json!({"cmd": "true"})).await;
    assert_eq!(
        (r.output.as_str(), r.stop),
        ("[no output]", StopReason::Completed)
    );
    eprintln!("TRUE_ELAPSED {:?}", start.elapsed());
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );

    let r = h
        .call(
            "exec_command",
            json!({"cmd": "echo out; echo err >&2; exit 3"}),
        )
        .await;
    assert_eq!(r.stop, StopReason::Failed);
    assert!(r.output.ends_with("\n[exit code: 3]"), "{:?}", r.output);
    assert!(r.output.contains("out\n") && r.output.contains("err\n"));

    let r = h
        .call("exec_command", json!({"cmd": "kill -TERM $$"}))
        .await;
    assert_eq!(r.output, "[terminated by signal SIGTERM]");
    assert_eq!(r.stop, StopReason::Failed);

    let r = h
        .call("exec_command", json!({"cmd": "pwd", "workdir": "sub"}))
        .await;
    assert_eq!(
        r.output,
        format!(
            "[spawn error: working directory {}/sub does not exist or is not a directory]",
            h.workspace()
        )
    );
    std::fs::create_dir(h.dir.path().join("sub")).unwrap();
    let r = h
        .call("exec_command", json!({"cmd": "pwd", "workdir": "sub"}))
        .await;
    assert_eq!(r.output, format!("{}/sub\n", h.workspace()));

    let r = h
        .call("exec_command", json!({"cmd": "echo $TERM $NO_COLOR $PAGER $GIT_PAGER $GIT_EDITOR $GIT_TERMINAL_PROMPT"}))
        .await;
    assert_eq!(r.output, "dumb 1 cat cat true 0\n");

    let r = h.call("exec_command", json!({"description": "x"})).await;
    assert_eq!(
        r.output,
        "Missing required argument \"cmd\" for exec_command."
    );
    h.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_streams_while_the_command_runs() {
    let h = harness().await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let commands = h.commands();
    let call = tokio::spawn(async move {
        call_with(
            commands,
            "exec_command",
            json!({"cmd": "echo first; sleep 1; echo second"}),
            None,
            Some(tx),
        )
        .await
    });
    let first = tokio::time::timeout(LONG, rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first, "first\n");
    assert!(
        !call.is_finished(),
        "the first line must arrive before the command ends"
    );
    let r = call.await.unwrap();
    assert_eq!(r.output, "first\nsecond\n");
    assert_eq!(r.deltas, vec!["first\n", "second\n"]);
    h.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_abort_kills_a_foreground_command_but_only_ends_a_poll() {
    let h = harness().await;
    let cancel = CancellationToken::new();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (commands, token) = (h.commands(), cancel.clone());
    let call = tokio::spawn(async move {
        let args = json!({"cmd": "echo pg:$$; sleep 401.5"});
        call_full(commands, "exec_command", args, None, Some(tx), token).await
    });
    let first = tokio::time::timeout(LONG, rx.recv())
        .await
        .unwrap()
        .unwrap();
    let pg = number_after(&first, "pg:");
    cancel.cancel();
    let r = call.await.unwrap();
    assert_eq!(r.stop, StopReason::Aborted);
    assert_eq!(
        r.output,
        format!("pg:{pg}\n\n[interrupted: tool aborted by user]")
    );
    eventually(LONG, "aborted command killed", || group_gone(pg)).await;
    let r = h.call("list_commands", json!({})).await;
    assert_eq!(r.output, "[no background commands]");

    let id = start_bg(&h, "cat").await;
    let cancel = CancellationToken::new();
    cancel.cancel();
    let args = json!({"process_id": id, "chars": "x\n", "yield_time_ms": 5000});
    let r = call_full(h.commands(), "input_command", args, None, None, cancel).await;
    assert_eq!(r.stop, StopReason::Aborted);
    let r = h
        .call(
            "input_command",
            json!({"process_id": id, "yield_time_ms": 1000}),
        )
        .await;
    assert_eq!(
        r.output,
        format!("x\n\n[process still running with process_id {id}]")
    );
    h.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_ctrl_c_and_unknown_ids() {
    let h = harness().await;
    let r = h
        .call("exec_command", json!({"cmd": "cat", "yield_time_ms": 300}))
        .await;
    let id = process_id(&r.output);
    assert_eq!(
        r.output,
        format!(
            "[process running with process_id {id}; use input_command to send input or poll for output]"
        )
    );
    assert_eq!(r.stop, StopReason::Completed);

    let r = h
        .call(
            "input_command",
            json!({"process_id": id, "chars": "hello\n", "yield_time_ms": 1000}),
        )
        .await;
    assert_eq!(
        r.output,
        format!("hello\n\n[process still running with process_id {id}]")
    );

    let r = h
        .call(
            "input_command",
            json!({"process_id": id, "chars": "a\u{3}"}),
        )
        .await;
    assert_eq!(
        r.output,
        "[input_command error: chars mixes U+0003 (Ctrl-C) with other content; send \"\\u0003\" alone to interrupt]"
    );
    assert_eq!(r.stop, StopReason::Failed);

    let r = h
        .call(
            "input_command",
            json!({"process_id": id, "chars": "\u{3}", "yield_time_ms": 10000}),
        )
        .await;
    assert_eq!(
        (r.output.as_str(), r.stop),
        ("[terminated by signal SIGINT]", StopReason::Failed)
    );

    // Exited and observed: removed from the registry.
    let r = h.call("input_command", json!({"process_id": id})).await;
    assert_eq!(
        r.output,
        format!(
            "[input_command error: unknown process_id {id} (the session may have exited and been cleared)]"
        )
    );
    let r = h.call("kill_command", json!({"process_id": id})).await;
    assert_eq!(
        r.output,
        format!(
            "[kill_command error: unknown process_id {id} (the session may have exited and been cleared)]"
        )
    );
    assert_eq!(r.stop, StopReason::Failed);
    h.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pty_mode_is_a_terminal_and_takes_input() {
    let h = harness().await;
    let cmd = "[ -t 0 ] && echo tty || echo notty";
    let r = h
        .call("exec_command", json!({"cmd": cmd, "tty": true}))
        .await;
    assert_eq!(r.output, "tty\r\n");
    let r = h.call("exec_command", json!({"cmd": cmd})).await;
    assert_eq!(r.output, "notty\n");

    let r = h
        .call(
            "exec_command",
            json!({"cmd": "read -r x; echo got:$x", "tty": true, "yield_time_ms": 300}),
        )
        .await;
    let id = process_id(&r.output);
    let r = h
        .call(
            "input_command",
            json!({"process_id": id, "chars": "abc\n", "yield_time_ms": 10000}),
        )
        .await;
    // The terminal echoes the input, then the program answers.
    assert_eq!(r.output, "abc\r\ngot:abc\r\n");
    assert_eq!(r.stop, StopReason::Completed);
    h.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_notice_kill_and_list() {
    let mut h = harness().await;
    let r = h.call("list_commands", json!({})).await;
    assert_eq!(r.output, "[no background commands]");

    let cmd = "echo hi; exit 4\necho never";
    let r = h
        .call(
            "exec_command",
            json!({"cmd": cmd, "run_in_background": true}),
        )
        .await;
    let id = process_id(&r.output);
    assert_eq!(
        r.output,
        format!(
            "[command running in background with process_id {id}; its completion will arrive as a user message — no need to poll. Use input_command to interact or kill_command to stop it]"
        )
    );
    let CommandEvent::Completed { notice_text } = h.next_event().await else {
        panic!("expected a completion");
    };
    let expected = format!(
        "[background_task_done]\nAutomatic notification from the harness, not the user: a background task you started has finished.\nkind: command\nid: {id}\nstatus: failed\ndetail: exit code 4\n[/background_task_done]\n\nBackground command failed: `echo hi; exit 4` (process_id {id}) — exit code 4\n\nhi\n"
    );
    assert_eq!(notice_text, expected);
    assert_eq!(
        notice_text,
        completion_notice(&id, "echo hi; exit 4", &ExitInfo::Code(4), "hi\n")
    );

    let r = h
        .call(
            "exec_command",
            json!({"cmd": "sleep 100.25", "run_in_background": true}),
        )
        .await;
    let sleeper = process_id(&r.output);
    let r = h.call("list_commands", json!({})).await;
    let lines: Vec<&str> = r.output.lines().collect();
    assert_eq!(lines.len(), 2, "{}", r.output);
    let re = |s: &str| Regex::new(&format!("^{s}$")).unwrap();
    assert!(
        re(&format!(
            r"{id}  exited \(exit code 4\)  last used \d+s ago  echo hi; exit 4"
        ))
        .is_match(lines[0]),
        "{}",
        lines[0]
    );
    assert!(
        re(&format!(
            r"{sleeper}  running  last used \d+s ago  sleep 100\.25"
        ))
        .is_match(lines[1]),
        "{}",
        lines[1]
    );

    // An exited command: its unread output, then the note.
    let r = h.call("kill_command", json!({"process_id": id})).await;
    assert_eq!(
        r.output,
        format!("hi\n\n[process {id} had already exited (exit code 4); session removed]")
    );
    assert_eq!(r.stop, StopReason::Completed);
    let r = h.call("kill_command", json!({"process_id": sleeper})).await;
    assert_eq!(
        r.output,
        format!(
            "[process {sleeper} killed (SIGTERM to the process group, SIGKILL after a grace period)]"
        )
    );
    // kill_command disarmed the notice: the only further event would be a wrong one.
    eventually(LONG, "sleep 100 gone", || {
        live_with_cmdline(&["sleep", "100.25"]).is_empty()
    })
    .await;
    let r = h.call("list_commands", json!({})).await;
    assert_eq!(r.output, "[no background commands]");
    h.handle.shutdown().await;
    assert!(h.events.try_recv().is_err(), "no notice after kill_command");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn utf8_flood_keeps_characters_whole_and_marks_the_ring() {
    let mut h = harness().await;
    // 200000 lines of 6 characters = 1,200,000 characters (2.6 MB of UTF-8).
    let r = h
        .call(
            "exec_command",
            json!({"cmd": "yes 'ÄÖÜ✓€' | head -n 200000", "run_in_background": true}),
        )
        .await;
    let id = process_id(&r.output);
    let CommandEvent::Completed { notice_text } = h.next_event().await else {
        panic!("expected a completion");
    };
    let (_, tail) = notice_text
        .split_once("\n\n[earlier output dropped: exceeded 4000 chars]\n")
        .unwrap();
    assert_eq!(tail.chars().count(), 4000);
    assert!(tail.ends_with("\nÄÖÜ✓€\n") && !tail.contains('\u{FFFD}'));
    let r = call_with(
        h.commands(),
        "input_command",
        json!({"process_id": id}),
        Some(0),
        None,
    )
    .await;
    assert_eq!(r.stop, StopReason::Completed);
    // The ring keeps the last 1 MiB of bytes (cut on a character boundary); the marker counts
    // the characters that went unread.
    let re = Regex::new(r"\A\[\.\.\. (\d+) chars of earlier output dropped \.\.\.\]\n").unwrap();
    let m = re.captures(&r.output).expect("drop marker");
    let dropped: usize = m[1].parse().unwrap();
    let body = &r.output[m.get(0).unwrap().end()..];
    assert!(
        (1_048_573..=1_048_576).contains(&body.len()),
        "{}",
        body.len()
    );
    assert_eq!(dropped + body.chars().count(), 1_200_000);
    assert!(!body.contains('\u{FFFD}'));
    // The ring cut inside a line (on a character boundary); every later line is whole.
    let (_, whole) = body.split_once('\n').unwrap();
    assert!(whole.lines().all(|l| l == "ÄÖÜ✓€"));
    assert!(whole.ends_with("ÄÖÜ✓€\n"));
    h.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seventy_concurrent_background_commands_leave_sixty_four() {
    let mut h = harness().await;
    let calls: Vec<_> = (0..70)
        .map(|i| {
            let commands = h.commands();
            tokio::spawn(async move {
                let cmd = format!("sleep {}", 7000 + i);
                let r = call_with(
                    commands,
                    "exec_command",
                    json!({"cmd": cmd, "run_in_background": true}),
                    None,
                    None,
                )
                .await;
                (i, r.output)
            })
        })
        .collect();
    let mut ids = Vec::new();
    let mut crowded = 0;
    for c in calls {
        let (i, out) = c.await.unwrap();
        if out.contains("background commands are open (limit 64)") {
            crowded += 1;
        }
        ids.push((i, process_id(&out)));
    }
    assert!(
        crowded >= 10,
        "the crowding note appears from 60 on ({crowded})"
    );
    let mut evicted = HashSet::new();
    for _ in 0..6 {
        match h.next_event().await {
            CommandEvent::Evicted { process_id, status } => {
                assert_eq!(status, "running");
                evicted.insert(process_id);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(h.events.try_recv().is_err());
    let r = h.call("list_commands", json!({})).await;
    assert_eq!(r.output.lines().count(), 64);
    for (i, id) in &ids {
        let argv = format!("{}", 7000 + i);
        if evicted.contains(id) {
            let r = h.call("input_command", json!({"process_id": id})).await;
            assert!(
                r.output
                    .starts_with("[input_command error: unknown process_id")
            );
            eventually(LONG, "evicted group killed", || {
                live_with_cmdline(&["sleep", &argv]).is_empty()
            })
            .await;
        } else {
            // A background call answers once its process is spawned; under load the shell may
            // not have exec'd `sleep` yet.
            eventually(LONG, &format!("{id} alive"), || {
                live_with_cmdline(&["sleep", &argv]).len() == 1
            })
            .await;
        }
    }
    h.handle.shutdown().await;
    for (i, _) in &ids {
        assert!(live_with_cmdline(&["sleep", &format!("{}", 7000 + i)]).is_empty());
    }
    let r = h.call("exec_command", json!({"cmd": "true"})).await;
    assert_eq!(r.output, "[spawn error: command session manager disposed]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_follows_least_recent_use_exited_first() {
    let mut h = harness_with(3).await;
    let a = start_bg(&h, "sleep 101.5").await;
    let b = start_bg(&h, "sleep 102.5").await;
    let c = start_bg(&h, "sleep 103.5").await;
    // Polling A makes it more recent than B and C.
    let r = h
        .call(
            "input_command",
            json!({"process_id": a, "yield_time_ms": 250}),
        )
        .await;
    assert_eq!(
        r.output,
        format!("[process still running with process_id {a}]")
    );
    let d = start_bg(&h, "sleep 104.5").await;
    assert_eq!(
        h.next_event().await,
        CommandEvent::Evicted {
            process_id: b.clone(),
            status: "running".into()
        }
    );
    let e = start_bg(&h, "exit 0").await;
    assert_eq!(
        h.next_event().await,
        CommandEvent::Evicted {
            process_id: c.clone(),
            status: "running".into()
        }
    );
    let CommandEvent::Completed { notice_text } = h.next_event().await else {
        panic!("expected E's completion");
    };
    assert!(notice_text.contains(&format!("id: {e}\nstatus: completed\n")));
    // E exited: it goes first although A and D were used earlier.
    let _f = start_bg(&h, "sleep 105.5").await;
    assert_eq!(
        h.next_event().await,
        CommandEvent::Evicted {
            process_id: e.clone(),
            status: "exited".into()
        }
    );
    let listed = h.call("list_commands", json!({})).await.output;
    assert!(listed.contains(&a) && listed.contains(&d) && !listed.contains(&b));
    h.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_end_kills_leftovers_and_shutdown_reaps_everything() {
    let h = harness().await;
    let r = h
        .call("exec_command", json!({"cmd": "sleep 201.5 & echo bg:$!"}))
        .await;
    assert_eq!(r.stop, StopReason::Completed);
    let bg = number_after(&r.output, "bg:");
    eventually(LONG, "the & child dies with its call", || {
        proc_stat(bg).is_none_or(|(s, _, _)| s == 'Z')
    })
    .await;

    // Three registered commands (pipes, pty, one ignoring SIGTERM), started side by side.
    let running = |cmd: &str, tty: bool| {
        h.call(
            "exec_command",
            json!({"cmd": cmd, "tty": tty, "yield_time_ms": 1000}),
        )
    };
    let (a, b, c) = tokio::join!(
        running("echo pg:$$; sleep 202.5 & sleep 203.5", false),
        running("echo pg:$$; sleep 202.5 & sleep 203.5", true),
        running("trap '' TERM; echo pg:$$; sleep 204.5", false),
    );
    let mut groups = Vec::new();
    for r in [a, b, c] {
        assert!(
            r.output.contains("[process running with process_id"),
            "{}",
            r.output
        );
        groups.push(number_after(&r.output, "pg:"));
    }
    for pg in &groups {
        assert!(!group_gone(*pg));
    }
    h.handle.shutdown().await;
    for pg in &groups {
        assert!(group_gone(*pg), "group {pg} survived shutdown");
    }
    eventually(LONG, "no zombie children", || {
        our_zombies().iter().all(|z| !groups.contains(z))
    })
    .await;
    h.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_supervisor_kills_its_groups() {
    let h = harness().await;
    let r = h
        .call(
            "exec_command",
            json!({"cmd": "echo pg:$$; sleep 301.5 & sleep 302.5", "yield_time_ms": 1000}),
        )
        .await;
    let pg = number_after(&r.output, "pg:");
    assert!(!group_gone(pg));
    h.handle.actor().kill();
    eventually(LONG, "group killed by the Drop guards", || group_gone(pg)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_manager_every_tool_says_so() {
    for (tool, args) in [
        ("exec_command", json!({"cmd": "true"})),
        ("input_command", json!({"process_id": "proc-00000000"})),
        ("kill_command", json!({"process_id": "proc-00000000"})),
        ("list_commands", json!({})),
    ] {
        let r = call_with(None, tool, args, None, None).await;
        assert_eq!(
            r.output,
            format!("[{tool} unavailable: no command session manager configured]")
        );
        assert_eq!(r.stop, StopReason::Failed);
    }
}
