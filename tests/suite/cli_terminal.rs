//! `rookery run` and `chat` on a real terminal (a pseudo-terminal): text and thinking stream as
//! they arrive (thinking dimmed, or hidden with `--hide-thinking`), a streamed message is shown
//! once, a spinner with the time waited shows while the model or a tool is silent and stops for
//! an approval question and on Ctrl-C, tool calls show when they start, `NO_COLOR` and
//! `TERM=dumb` are respected, escape sequences from the model are shown escaped, and output that
//! is not a terminal is the plain transcript it always was.

use std::process::Command;

use serde_json::json;

use crate::common::cli::{RUN_TIMEOUT, Running, Sandbox};
use crate::common::openai_mock::{Mock, Reply};
use crate::common::pty::Terminal;

/// SGR dim, as the terminal view starts thinking.
const DIM: &str = "\x1b[2m";

/// `rookery run --workspace W --home H <args>` on a terminal, with colour allowed.
fn run_on_terminal(sb: &Sandbox, args: &[&str]) -> Command {
    let mut cmd = sb.run_command(args);
    cmd.env_remove("NO_COLOR");
    cmd
}

/// A long answer with a marker at each end, and the script that thinks, then says it.
fn long_answer() -> String {
    let words: Vec<String> = (0..400).map(|i| format!("word{i}")).collect();
    format!("ANSWER-START {} ANSWER-END", words.join(" "))
}

fn thinking_script(sb: &Sandbox) -> String {
    let script = sb.script(&json!({"turns": [
        {"thinking": "weighing the options", "text": long_answer()}
    ]}));
    script.to_str().expect("utf-8 path").to_string()
}

/// SGR sequences (`ESC [ … m`): colour, dim, bold, reset.
fn sgr_codes(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (i, _) in text.match_indices("\x1b[") {
        let rest = &text[i + 2..];
        let params: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ';')
            .collect();
        if rest[params.len()..].starts_with('m') {
            found.push(format!("ESC[{params}m"));
        }
    }
    found
}

#[test]
fn a_streamed_answer_is_shown_once_and_thinking_is_dimmed() {
    let sb = Sandbox::new();
    let script = thinking_script(&sb);
    let term = Terminal::spawn(run_on_terminal(&sb, &["--script", &script, "go"]));
    let (code, screen) = term.finish();
    assert_eq!(code, Some(0), "{screen}");
    assert_eq!(
        screen.matches(&long_answer()).count(),
        1,
        "the answer streamed once and was not printed again on completion:\n{screen}"
    );
    assert_eq!(screen.matches("ANSWER-START").count(), 1, "{screen}");
    assert!(
        screen.contains(&format!("{DIM}weighing the options\x1b[0m")),
        "thinking is dimmed:\n{screen:?}"
    );
    let thinking_at = screen.find("weighing").expect("thinking shown");
    let answer_at = screen.find("ANSWER-START").expect("answer shown");
    assert!(thinking_at < answer_at, "thinking comes before the answer");
}

#[test]
fn hide_thinking_keeps_the_thinking_off_the_screen() {
    let sb = Sandbox::new();
    let script = thinking_script(&sb);
    let term = Terminal::spawn(run_on_terminal(
        &sb,
        &["--hide-thinking", "--script", &script, "go"],
    ));
    let (code, screen) = term.finish();
    assert_eq!(code, Some(0), "{screen}");
    assert!(!screen.contains("weighing"), "{screen}");
    assert!(!screen.contains(DIM), "{screen:?}");
    assert_eq!(screen.matches(&long_answer()).count(), 1, "{screen}");
}

/// An OpenAI-compatible stream that sends one piece of text, then nothing more.
const FIRST_PIECE_THEN_SILENCE: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Streaming the first piece\"},\"finish_reason\":null}]}\n\n",
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_shows_before_its_message_completes_and_ctrl_c_still_exits_130() {
    let mock = Mock::start(
        vec![Reply::Stall(vec![FIRST_PIECE_THEN_SILENCE.to_string()])],
        Some("Bearer sk-term".to_string()),
    )
    .await;
    let base_url = mock.base_url.clone();
    let (code, screen) = tokio::task::spawn_blocking(move || {
        let sb = Sandbox::new();
        let mut cmd = run_on_terminal(
            &sb,
            &[
                "--provider",
                "openai",
                "--base-url",
                &base_url,
                "--model",
                "gpt-test",
                "--api-key-env",
                "ROOKERY_TERM_KEY",
                "go",
            ],
        );
        cmd.env("ROOKERY_TERM_KEY", "sk-term");
        let mut term = Terminal::spawn(cmd);
        // The message never completes (the stream stalls): the piece is on screen anyway.
        term.wait_for("the first streamed piece", |t| {
            t.contains("Streaming the first piece")
        });
        term.interrupt();
        term.finish()
    })
    .await
    .expect("terminal thread");
    assert_eq!(code, Some(130), "{screen}");
    assert_eq!(
        screen.matches("Streaming the first piece").count(),
        1,
        "{screen}"
    );
    let after = screen
        .split("rookery: interrupted; aborting the task")
        .nth(1)
        .unwrap_or_else(|| panic!("the interrupt is reported:\n{screen}"));
    assert!(
        !after.contains("waiting for the model"),
        "no spinner after Ctrl-C:\n{after:?}"
    );
    mock.assert_clean();
}

#[test]
fn a_spinner_counts_the_seconds_while_the_model_is_silent() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{"text": "late", "delay_ms": 600000}]}));
    let mut term = Terminal::spawn(run_on_terminal(
        &sb,
        &["--script", script.to_str().unwrap(), "go"],
    ));
    term.wait_for("the spinner at one second", |t| {
        t.contains("waiting for the model (1s)")
    });
    term.interrupt();
    let (code, screen) = term.finish();
    assert_eq!(code, Some(130), "{screen}");
    assert!(!screen.contains("late"), "{screen}");
}

#[test]
fn a_tool_call_shows_when_it_starts_with_a_spinner_while_it_runs() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [{"name": "exec_command",
                         "arguments": {"cmd": "sleep 60", "description": "Wait a minute."}}]},
        {"text": "never"}
    ]}));
    let mut term = Terminal::spawn(run_on_terminal(
        &sb,
        &["--script", script.to_str().unwrap(), "go"],
    ));
    term.wait_for("the tool call line and its spinner", |t| {
        t.contains("▸ exec_command — Wait a minute.\n") && t.contains("running exec_command (")
    });
    term.interrupt();
    let (code, screen) = term.finish();
    assert_eq!(code, Some(130), "{screen}");
    assert_eq!(
        screen.matches("▸ exec_command — Wait a minute.").count(),
        1,
        "{screen}"
    );
}

#[test]
fn the_spinner_stays_off_while_an_approval_question_waits() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [
        {"tool_calls": [{"name": "exec_command",
                         "arguments": {"cmd": "echo approved-and-ran", "description": "Say it."}}]},
        {"text": "all done"}
    ]}));
    let mut term = Terminal::spawn(run_on_terminal(
        &sb,
        &[
            "--approve",
            "always-ask",
            "--script",
            script.to_str().unwrap(),
            "go",
        ],
    ));
    let question = "for this session ";
    term.wait_for("the approval question", |t| t.contains(question));
    // Nothing to wait on for an absence: give a drawing spinner ten ticks to show itself.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let asked = term.text();
    let after = asked.rsplit(question).next().unwrap_or_default();
    assert_eq!(after, "", "nothing is drawn over the question:\n{asked:?}");
    let line_at = asked.find("▸ exec_command — Say it.\n");
    let question_at = asked.find("Allow exec_command");
    assert!(
        line_at.is_some() && line_at < question_at,
        "the call's line comes before its question:\n{asked}"
    );
    term.type_in(b"y\r");
    let (code, screen) = term.finish();
    assert_eq!(code, Some(0), "{screen}");
    assert!(screen.contains("    approved-and-ran\n"), "{screen}");
    assert!(screen.contains("all done"), "{screen}");
}

#[test]
fn no_color_and_dumb_terminals_get_no_colour_codes() {
    let sb = Sandbox::new();
    let script = thinking_script(&sb);
    let mut cmd = sb.run_command(&["--script", &script, "go"]);
    cmd.env("NO_COLOR", "1");
    let (code, screen) = Terminal::spawn(cmd).finish();
    assert_eq!(code, Some(0), "{screen}");
    assert_eq!(sgr_codes(&screen), Vec::<String>::new(), "{screen:?}");
    assert!(screen.contains("weighing the options\n"), "{screen}");
    assert_eq!(screen.matches(&long_answer()).count(), 1, "{screen}");

    // TERM=dumb: no colour and no spinner, however long the model is silent.
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [
        {"thinking": "quietly", "text": "after a pause", "delay_ms": 1500}
    ]}));
    let mut cmd = run_on_terminal(&sb, &["--script", script.to_str().unwrap(), "go"]);
    cmd.env("TERM", "dumb");
    let (code, screen) = Terminal::spawn(cmd).finish();
    assert_eq!(code, Some(0), "{screen}");
    assert!(!screen.contains('\x1b'), "no escape at all: {screen:?}");
    assert!(!screen.contains("waiting for the model"), "{screen:?}");
    assert!(screen.contains("quietly\nafter a pause\n"), "{screen:?}");
}

#[test]
fn escape_sequences_from_the_model_are_shown_escaped() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [{
        "thinking": "think \u{1b}[8m hidden",
        "text": "title \u{1b}]0;pwned\u{7} clear \u{1b}[2J back\roverwrite \u{9b}31m"
    }]}));
    let (code, screen) = Terminal::spawn(run_on_terminal(
        &sb,
        &["--script", script.to_str().unwrap(), "go"],
    ))
    .finish();
    assert_eq!(code, Some(0), "{screen}");
    for raw in ["\x1b]0;", "\x1b[2J", "\x1b[8m", "\u{9b}", "back\roverwrite"] {
        assert!(
            !screen.contains(raw),
            "{raw:?} reached the terminal: {screen:?}"
        );
    }
    assert!(
        screen.contains("title ␛]0;pwned␇ clear ␛[2J back␍overwrite \\u{9b}31m"),
        "{screen:?}"
    );
    assert!(screen.contains("think ␛[8m hidden"), "{screen:?}");
}

#[test]
fn output_that_is_not_a_terminal_is_the_plain_transcript() {
    let sb = Sandbox::new();
    let script = sb.script(&json!({"turns": [
        {"thinking": "plan", "text": "I will run it.",
         "tool_calls": [{"name": "exec_command",
                         "arguments": {"cmd": "echo hi", "description": "Say hi."}}]},
        {"text": "done \u{1b}[1m"}
    ]}));
    for extra in [&[][..], &["--hide-thinking"][..]] {
        let mut args = extra.to_vec();
        args.extend(["--script", script.to_str().unwrap(), "go"]);
        let mut cmd = run_on_terminal(&sb, &args);
        cmd.env("TERM", "xterm");
        let out = Running::spawn(cmd).wait(RUN_TIMEOUT);
        out.expect_code(0);
        assert_eq!(
            out.stdout, "I will run it.\n▸ exec_command — Say hi.\n    hi\ndone \u{1b}[1m\n",
            "the transcript of a pipe is unchanged (bytes as the model sent them)"
        );
        assert!(!out.stderr.contains("waiting"), "{}", out.stderr);
        assert!(!out.stderr.contains('\x1b'), "{:?}", out.stderr);
    }
}

#[test]
fn chat_streams_on_a_terminal_and_shows_each_answer_once() {
    let sb = Sandbox::new();
    let script = thinking_script(&sb);
    let mut cmd = sb.command();
    cmd.env_remove("NO_COLOR").args([
        "chat",
        "--workspace",
        sb.ws().to_str().unwrap(),
        "--home",
        sb.home().to_str().unwrap(),
        "--script",
        &script,
    ]);
    let mut term = Terminal::spawn(cmd);
    term.wait_for("the prompt", |t| t.contains("> "));
    term.type_in(b"go\r");
    term.wait_for("the answer", |t| t.contains("ANSWER-END"));
    term.type_in(b"/exit\r");
    let (code, screen) = term.finish();
    assert_eq!(code, Some(0), "{screen}");
    assert_eq!(screen.matches(&long_answer()).count(), 1, "{screen}");
    assert!(
        screen.contains(&format!("{DIM}weighing the options")),
        "{screen:?}"
    );
    assert!(screen.contains("rookery chat --resume "), "{screen}");
}
