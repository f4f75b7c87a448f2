//! End-to-end tests of `rookery sessions list|show|rm`, driving the built binary on sessions
//! recorded by real `rookery run` and `rookery chat --resume` processes (scripted model, one
//! with a subagent), including a history split over `_001` and `_002` files, abbreviated and
//! ambiguous ids, and the `rm` confirmation (refused without a terminal, asked on a real
//! pseudo-terminal).

use crate::common::cli as support;

use support::*;

use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

const SUBAGENT_PROMPT: &str = "Please lint\nthe notes";

fn subagent_script() -> Value {
    json!({
        "turns": [
            { "tool_calls": [ { "name": "run_subagent",
                "arguments": { "description": "Ask a helper", "prompt": "lint the notes" } } ] },
            { "text": "The helper is done." } ],
        "children": [ { "when_prompt_contains": "lint", "turns": [
            { "tool_calls": [ { "name": "read_file", "arguments": { "file_path": "notes.md" } } ] },
            { "text": "No problems found." } ] } ]
    })
}

/// `rookery sessions <args> --home H`.
fn sessions(sb: &Sandbox, args: &[&str]) -> Out {
    let mut c = sb.command();
    c.arg("sessions").args(args).arg("--home").arg(sb.home());
    Running::spawn(c).wait(RUN_TIMEOUT)
}

fn session_id(trace: &Path) -> String {
    let name = trace.file_name().and_then(|n| n.to_str()).expect("name");
    name.strip_suffix("_001.jsonl")
        .expect("a _001 trace")
        .to_string()
}

/// Runs one task; returns the new session's id.
fn run_session(sb: &Sandbox, script: &Value, prompt: &str) -> String {
    let before = sb.trace_files();
    let path = sb.file(
        &format!("script-{}.json", before.len()),
        &script.to_string(),
    );
    sb.run(&["--script", s(&path), prompt]).expect_code(0);
    let new: Vec<PathBuf> = sb
        .trace_files()
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    let top: Vec<&PathBuf> = new
        .iter()
        .filter(|f| read_records(f)[0]["payload"]["source"].is_null())
        .collect();
    assert_eq!(top.len(), 1, "one new top-level trace: {new:?}");
    session_id(top[0])
}

/// A sandbox with a session with a subagent (older) and a plain one (newer).
struct Two {
    sb: Sandbox,
    with_child: String,
    child: String,
    plain: String,
}

fn two_sessions() -> Two {
    let sb = Sandbox::new();
    std::fs::write(sb.ws().join("notes.md"), "# notes\n").expect("notes");
    let with_child = run_session(&sb, &subagent_script(), SUBAGENT_PROMPT);
    let plain = run_session(&sb, &json!({"turns": [{"text": "Hello."}]}), "Say hello");
    let child = sb
        .trace_files()
        .iter()
        .map(|f| session_id(f))
        .find(|id| *id != with_child && *id != plain)
        .expect("the subagent's trace");
    Two {
        sb,
        with_child,
        child,
        plain,
    }
}

fn trace_of(sb: &Sandbox, id: &str) -> Vec<PathBuf> {
    sb.trace_files()
        .into_iter()
        .filter(|f| session_id_of_any(f) == id)
        .collect()
}

/// The id of a `<id>_NNN.jsonl` file.
fn session_id_of_any(trace: &Path) -> String {
    let name = trace.file_name().and_then(|n| n.to_str()).expect("name");
    name.rsplit_once('_').expect("an _NNN file").0.to_string()
}

#[test]
fn list_shows_top_level_sessions_newest_first() {
    let t = two_sessions();
    let out = sessions(&t.sb, &["list"]);
    out.expect_code(0);
    let lines = out.stdout_lines();
    assert_eq!(lines.len(), 3, "header and two sessions:\n{}", out.stdout);
    let header: Vec<&str> = lines[0].split("  ").filter(|c| !c.is_empty()).collect();
    let header: Vec<&str> = header.iter().map(|c| c.trim()).collect();
    assert_eq!(
        header,
        vec![
            "ID",
            "STATUS",
            "STARTED",
            "LAST ACTIVITY",
            "PROFILE",
            "MODEL",
            "PROMPT"
        ]
    );
    assert!(lines[1].starts_with(&format!("{}  completed  ", t.plain)));
    assert!(
        lines[1].contains("  penguin  scripted  Say hello"),
        "{}",
        lines[1]
    );
    assert!(lines[2].starts_with(&format!("{}  completed  ", t.with_child)));
    assert!(
        lines[2].ends_with("  penguin  scripted  Please lint"),
        "first line of the prompt only: {}",
        lines[2]
    );
    assert!(
        !out.stdout.contains(&t.child),
        "subagents are not top level"
    );

    // --all: the subagent under the session that started it.
    let out = sessions(&t.sb, &["list", "--all"]);
    out.expect_code(0);
    let lines = out.stdout_lines();
    assert_eq!(lines.len(), 4, "{}", out.stdout);
    assert!(lines[2].starts_with(&t.with_child));
    assert!(
        lines[3].starts_with(&format!("↳ {}  completed", t.child)),
        "{}",
        lines[3]
    );
    assert!(lines[3].ends_with("lint the notes"), "{}", lines[3]);
}

#[test]
fn list_json_has_one_object_per_session() {
    let t = two_sessions();
    let out = sessions(&t.sb, &["list", "--json"]);
    out.expect_code(0);
    let rows: Vec<Value> = out
        .stdout_lines()
        .iter()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(rows.len(), 2, "{}", out.stdout);
    assert_eq!(rows[0]["id"], t.plain.as_str());
    let row = &rows[1];
    assert_eq!(row["id"], t.with_child.as_str());
    assert_eq!(row["status"], "completed");
    assert_eq!(row["tool_profile"], "penguin");
    assert_eq!(row["model"], "scripted");
    assert_eq!(row["provider"], "scripted");
    assert_eq!(row["first_prompt"], "Please lint");
    assert_eq!(row["tasks"], 1);
    assert_eq!(row["subagents"], json!([t.child]));
    let records = read_records(&trace_of(&t.sb, &t.with_child)[0]);
    assert_eq!(row["started"], records[0]["timestamp"]);
    assert_eq!(
        row["last_activity"],
        records.last().expect("records")["timestamp"]
    );
    assert_eq!(row["records"], records.len());

    let out = sessions(&t.sb, &["list", "--json", "--all"]);
    let rows: Vec<Value> = out
        .stdout_lines()
        .iter()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[2]["id"], t.child.as_str());
    assert_eq!(rows[2]["source"], "subagent");
    assert_eq!(rows[2]["parent"], t.with_child.as_str());
}

#[test]
fn show_renders_the_transcript_with_the_subagent_indented() {
    let t = two_sessions();
    let hex = t.with_child.rsplit('-').next().expect("hex");
    let out = sessions(&t.sb, &["show", &hex[..6]]);
    out.expect_code(0);
    let lines = out.stdout_lines();
    assert!(
        lines[0].starts_with(&format!("session {} · completed · scripted", t.with_child)),
        "{}",
        lines[0]
    );
    let body: Vec<&str> = lines
        .iter()
        .copied()
        .skip_while(|l| !l.is_empty())
        .skip(1)
        .collect();
    let child_status = format!("    ↳ subagent {} · completed", t.child);
    let expected = vec![
        "> Please lint",
        "> the notes",
        "▸ run_subagent — Ask a helper",
        child_status.as_str(),
        "    │ > lint the notes",
        r#"    │ ▸ read_file — {"file_path":"notes.md"}"#,
        "    │          1\t# notes",
        "    │ No problems found.",
        "    │ · task completed",
        "    No problems found.",
        "The helper is done.",
        "· task completed",
    ];
    assert_eq!(body, expected, "transcript:\n{}", out.stdout);

    // --json: the records verbatim, in file order.
    let out = sessions(&t.sb, &["show", &t.with_child, "--json"]);
    out.expect_code(0);
    let file = std::fs::read_to_string(&trace_of(&t.sb, &t.with_child)[0]).expect("trace");
    assert_eq!(out.stdout, file);

    // A subagent can be shown by its subagent id, and names its parent.
    let child_hex = t.child.rsplit('-').next().expect("hex");
    let out = sessions(&t.sb, &["show", &format!("subagent-{child_hex}")]);
    out.expect_code(0);
    assert!(
        out.stdout
            .contains(&format!("subagent of {}", t.with_child))
    );
    assert!(
        out.stdout.contains("\n> lint the notes\n"),
        "{}",
        out.stdout
    );
}

#[test]
fn ids_resolve_by_unique_prefix_and_ambiguity_lists_the_candidates() {
    let t = two_sessions();
    for query in [
        t.plain.clone(),
        t.plain[..t.plain.len() - 3].to_string(),
        t.plain["session-".len()..].to_string(),
        t.plain.rsplit('-').next().expect("hex")[..6].to_string(),
    ] {
        let out = sessions(&t.sb, &["show", &query]);
        out.expect_code(0);
        assert!(
            out.stdout.starts_with(&format!("session {} ", t.plain)),
            "{query}: {}",
            out.stdout
        );
    }
    let out = sessions(&t.sb, &["show", "session-"]);
    out.expect_config_error(&[
        "\"session-\" is ambiguous",
        &t.plain,
        &t.with_child,
        &t.child,
    ]);
    let out = sessions(&t.sb, &["rm", "session-", "--yes"]);
    out.expect_config_error(&["ambiguous"]);
    assert_eq!(t.sb.trace_files().len(), 3, "nothing deleted");

    let out = sessions(&t.sb, &["show", "session-1999"]);
    out.expect_config_error(&["no session matches \"session-1999\"", "sessions list"]);
    let out = sessions(&t.sb, &["rm", "../traces", "--yes"]);
    out.expect_config_error(&["no session matches"]);
}

#[test]
fn rm_refuses_without_a_terminal_and_deletes_with_yes() {
    let t = two_sessions();
    let out = sessions(&t.sb, &["rm", &t.with_child]);
    out.expect_config_error(&["not deleting", &t.with_child, "--yes"]);
    assert_eq!(t.sb.trace_files().len(), 3, "nothing deleted");

    let out = sessions(
        &t.sb,
        &["rm", &t.with_child[..t.with_child.len() - 2], "--yes"],
    );
    out.expect_code(0);
    assert!(
        out.stdout
            .starts_with(&format!("deleted session {}", t.with_child)),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("1 subagent"), "{}", out.stdout);
    let left: Vec<String> = t.sb.trace_files().iter().map(|f| session_id(f)).collect();
    assert_eq!(
        left,
        vec![t.plain.clone()],
        "the session and its subagent are gone"
    );
    let out = sessions(&t.sb, &["list", "--all"]);
    assert_eq!(out.stdout_lines().len(), 2, "{}", out.stdout);
    let out = sessions(&t.sb, &["show", &t.child]);
    out.expect_config_error(&["no session matches"]);
}

#[test]
fn rm_asks_on_a_terminal() {
    let t = two_sessions();
    let rm_on_terminal = |answer: &str| -> Out {
        let pty = nix::pty::openpty(None, None).expect("openpty");
        let mut c = t.sb.command();
        c.arg("sessions")
            .args(["rm", &t.plain, "--home"])
            .arg(t.sb.home())
            .stdin(Stdio::from(pty.slave));
        let running = Running::spawn(c);
        let mut master = std::fs::File::from(pty.master);
        master
            .write_all(answer.as_bytes())
            .expect("type the answer");
        let out = running.wait(RUN_TIMEOUT);
        drop(master);
        out
    };
    let out = rm_on_terminal("n\n");
    out.expect_code(1);
    assert!(
        out.stderr.contains(&format!(
            "Delete session {} (completed, 1 trace file)? [y/N]",
            t.plain
        )),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("nothing deleted"), "{}", out.stderr);
    assert_eq!(t.sb.trace_files().len(), 3);

    let out = rm_on_terminal("y\n");
    out.expect_code(0);
    assert!(
        out.stdout
            .starts_with(&format!("deleted session {}", t.plain))
    );
    assert_eq!(trace_of(&t.sb, &t.plain), Vec::<PathBuf>::new());
    assert_eq!(t.sb.trace_files().len(), 2, "the other session stays");
}

#[test]
fn a_history_over_several_files_is_one_session() {
    let sb = Sandbox::new();
    let script = sb.file("one.json", r#"{"turns": [{"text": "First answer."}]}"#);
    let id = run_session(
        &sb,
        &json!({"turns": [{"text": "First answer."}]}),
        "task one",
    );
    // A second task, appended by a resumed chat.
    let mut c = sb.command();
    c.args([
        "chat",
        "--resume",
        &id,
        "--script",
        s(&script),
        "--workspace",
    ])
    .arg(sb.ws())
    .arg("--home")
    .arg(sb.home())
    .stdin(Stdio::piped());
    let mut running = Running::spawn(c);
    let mut stdin = running.child.stdin.take().expect("stdin");
    stdin.write_all(b"task two\n/exit\n").expect("write");
    drop(stdin);
    running.wait(RUN_TIMEOUT).expect_code(0);

    // Split the history where the second task starts, as `_001` and `_002`.
    let first = sb.trace();
    let text = std::fs::read_to_string(&first).expect("trace");
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains(r#""text":"task two""#))
        .expect("the second prompt");
    let second = first.with_file_name(format!("{id}_002.jsonl"));
    std::fs::write(&first, lines[..at].join("\n") + "\n").expect("write _001");
    std::fs::write(&second, lines[at..].join("\n") + "\n").expect("write _002");
    let last_status = read_records(&second)
        .iter()
        .rev()
        .find(|r| kind(r) == "task_end")
        .expect("a task_end in _002")["payload"]["status"]
        .clone();

    let out = sessions(&sb, &["list", "--json"]);
    out.expect_code(0);
    let row: Value = serde_json::from_str(out.stdout.trim()).expect("one JSON line");
    assert_eq!(row["id"], id.as_str());
    assert_eq!(row["tasks"], 2);
    assert_eq!(row["first_prompt"], "task one");
    assert_eq!(row["status"], last_status);
    assert_eq!(row["files"], json!([s(&first), s(&second)]));
    assert_eq!(
        row["last_activity"],
        read_records(&second).last().expect("records")["timestamp"]
    );

    let out = sessions(&sb, &["show", &id]);
    out.expect_code(0);
    let one = out.stdout.find("\n> task one\n").expect("first prompt");
    let two = out.stdout.find("\n> task two\n").expect("second prompt");
    assert!(one < two, "{}", out.stdout);
    let out = sessions(&sb, &["show", &id, "--json"]);
    let both = std::fs::read_to_string(&first).expect("_001")
        + &std::fs::read_to_string(&second).expect("_002");
    assert_eq!(out.stdout, both);

    let out = sessions(&sb, &["rm", &id, "--yes"]);
    out.expect_code(0);
    assert!(out.stdout.contains("2 trace files"), "{}", out.stdout);
    assert!(sb.trace_files().is_empty());
}

#[test]
fn empty_and_bad_homes() {
    let sb = Sandbox::new();
    let out = sessions(&sb, &["list"]);
    out.expect_code(0);
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr.starts_with("no sessions under "),
        "{}",
        out.stderr
    );
    let out = sessions(&sb, &["list", "--json"]);
    out.expect_code(0);
    assert_eq!(out.stdout, "");

    let file = sb.file("not-a-dir", "x");
    let mut c = sb.command();
    c.args(["sessions", "list", "--home"]).arg(&file);
    let out = Running::spawn(c).wait(RUN_TIMEOUT);
    out.expect_config_error(&[s(&file), "not a directory"]);
}

#[test]
fn rookery_alone_prints_the_subcommands() {
    let sb = Sandbox::new();
    let out = Running::spawn(sb.command()).wait(RUN_TIMEOUT);
    assert!(matches!(out.code, Some(0 | 2)), "exit code {:?}", out.code);
    let help = format!("{}{}", out.stdout, out.stderr);
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    for name in ["run", "chat", "serve", "bench", "sessions"] {
        assert!(
            commands
                .iter()
                .any(|l| l.trim_start().starts_with(&format!("{name} "))),
            "{name} missing:\n{help}"
        );
    }
    // `rookery sessions` alone: its own subcommands.
    let mut c = sb.command();
    c.arg("sessions");
    let out = Running::spawn(c).wait(RUN_TIMEOUT);
    assert!(matches!(out.code, Some(0 | 2)), "exit code {:?}", out.code);
    let help = format!("{}{}", out.stdout, out.stderr);
    for name in ["list", "show", "rm"] {
        assert!(help.contains(&format!("  {name} ")), "{help}");
    }
}
