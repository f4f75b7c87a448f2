//! README.md and the user guide (`docs/guide/*.md`) cannot drift: every shell block marked
//! `<!-- runnable -->` runs, with bash, against the built `rookery` binary, and every block marked
//! `<!-- same-as: PATH -->` is that file, byte for byte. The marker convention is written down in
//! `docs/readme-blocks.md`.
//!
//! Each runnable block runs on its own: `bash -euo pipefail` in a fresh temp dir holding a copy of
//! `examples/`, with `HOME` pointing at an empty temp home (so `~/.rookery` is a temp dir) and the
//! directory of the built binary first on `PATH`. A block fails the test, named by its file and
//! line, when it exits non-zero or runs longer than [`BLOCK_TIMEOUT`]; whatever it left
//! running (a `rookery serve &`, a `curl -N &`) is killed with its process group. A block that
//! `needs postgres` runs with `ROOKERY_STORE` set to a throw-away Postgres started for it, and a
//! block that needs a command this machine lacks fails, naming it: nothing is skipped.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// How long one block may run (they take a few seconds; this is for a loaded 2-core machine).
const BLOCK_TIMEOUT: Duration = Duration::from_secs(120);

const RUNNABLE: &str = "<!-- runnable";
const SAME_AS: &str = "<!-- same-as:";

/// One fenced block that follows a marker.
#[derive(Debug)]
struct Block {
    /// The document it is in, relative to the repository (`README.md`, `docs/guide/serve.md`).
    file: String,
    /// 1-based line of the opening fence in its document.
    line: usize,
    /// The info string of the fence (`sh`, `rust`, …).
    lang: String,
    /// The marker's argument: the commands a runnable block needs, or the path a block mirrors.
    arg: String,
    text: String,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The documents whose blocks are tested: README.md and every page of the user guide, each as
/// (path relative to the repository, text).
fn documents() -> Vec<(String, String)> {
    let mut paths = vec!["README.md".to_string()];
    let mut guide: Vec<String> = std::fs::read_dir(repo().join("docs/guide"))
        .expect("docs/guide")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/guide/{name}"))
        .collect();
    guide.sort();
    paths.extend(guide);
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(repo().join(&path)).expect("document");
            (path, text)
        })
        .collect()
}

/// The blocks after `marker` in every document.
fn all_blocks(marker: &str) -> Vec<Block> {
    let mut out = Vec::new();
    for (file, text) in documents() {
        out.extend(blocks(&file, &text, marker).unwrap());
    }
    out
}

/// The blocks after each `marker` in `text`; a marker not followed (after blank lines) by a
/// fenced block is an error naming its line.
fn blocks(file: &str, text: &str, marker: &str) -> Result<Vec<Block>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        if !line.starts_with(marker) {
            i += 1;
            continue;
        }
        let marker_line = i + 1;
        let arg = line
            .strip_prefix(marker)
            .and_then(|rest| rest.strip_suffix("-->"))
            .ok_or(format!(
                "{file}:{marker_line}: a marker is one line ending in -->"
            ))?
            .trim()
            .trim_start_matches(':')
            .trim()
            .to_string();
        let mut j = i + 1;
        while j < lines.len() && lines[j].trim().is_empty() {
            j += 1;
        }
        let fence = lines.get(j).map(|l| l.trim_start()).unwrap_or("");
        let Some(lang) = fence.strip_prefix("```") else {
            return Err(format!(
                "{file}:{marker_line}: the marker is not followed by a fenced block"
            ));
        };
        let start = j + 1;
        let Some(len) = lines[start..].iter().position(|l| l.trim() == "```") else {
            return Err(format!("{file}:{}: the block is not closed", j + 1));
        };
        let mut body = lines[start..start + len].join("\n");
        body.push('\n');
        out.push(Block {
            file: file.to_string(),
            line: j + 1,
            lang: lang.trim().to_string(),
            arg,
            text: body,
        });
        i = start + len + 1;
    }
    Ok(out)
}

/// The word of `needs` that asks for a throw-away Postgres rather than a command.
const NEEDS_POSTGRES: &str = "postgres";

/// Whether a runnable block's `needs` asks for a Postgres: the block then runs with
/// `ROOKERY_STORE` pointing at one the test starts for it.
fn needs_postgres(arg: &str) -> bool {
    arg.strip_prefix("needs")
        .is_some_and(|list| list.split_whitespace().any(|w| w == NEEDS_POSTGRES))
}

/// The commands a runnable block names after `needs` that are not on this machine.
fn missing_commands(arg: &str) -> Vec<String> {
    let Some(list) = arg.strip_prefix("needs") else {
        return Vec::new();
    };
    list.split_whitespace()
        .filter(|w| *w != NEEDS_POSTGRES)
        .filter(|cmd| {
            !Command::new("bash")
                .args(["-c", &format!("command -v {cmd}")])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .map(str::to_string)
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Runs one block; `Err` says why it failed, with the end of its output.
fn run_block(block: &Block) -> Result<Duration, String> {
    // Started before the clock: a fresh cluster takes seconds on a loaded machine.
    let postgres = needs_postgres(&block.arg).then(crate::common::postgres::TestPostgres::start);
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    copy_dir(&repo().join("examples"), &work.join("examples"));
    let script = dir.path().join("block.sh");
    std::fs::write(&script, &block.text).unwrap();
    let (out_path, err_path) = (dir.path().join("stdout"), dir.path().join("stderr"));

    let bin = PathBuf::from(env!("CARGO_BIN_EXE_rookery"));
    let bin_dir = bin.parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let started = Instant::now();
    let mut bash = Command::new("bash");
    bash.arg("-euo")
        .arg("pipefail")
        .arg(&script)
        .current_dir(&work)
        .env("HOME", &home)
        .env("PATH", path)
        .env_remove("ROOKERY_HOME")
        .env_remove("ROOKERY_STORE")
        .env_remove("RUST_LOG");
    if let Some(pg) = &postgres {
        bash.env("ROOKERY_STORE", pg.url());
    }
    let mut child = bash
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .process_group(0)
        .spawn()
        .expect("bash");
    let pgid = child.id() as i32;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > BLOCK_TIMEOUT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let took = started.elapsed();
    // Whatever the block left running goes with its process group.
    let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    let _ = child.wait();
    let output = || {
        format!(
            "--- stdout (end) ---\n{}\n--- stderr (end) ---\n{}",
            tail(&out_path, 30),
            tail(&err_path, 30)
        )
    };
    match status {
        Some(s) if s.success() => Ok(took),
        Some(s) => Err(format!(
            "{}:{}: the block exited with {s}\n{}",
            block.file,
            block.line,
            output()
        )),
        None => Err(format!(
            "{}:{}: the block ran longer than {BLOCK_TIMEOUT:?}\n{}",
            block.file,
            block.line,
            output()
        )),
    }
}

#[test]
fn every_runnable_readme_block_runs() {
    let blocks = all_blocks(RUNNABLE);
    assert!(
        blocks.len() >= 6,
        "expected the runnable blocks of README.md and docs/guide/, found {}",
        blocks.len()
    );
    let mut failures = Vec::new();
    for block in &blocks {
        assert!(
            matches!(block.lang.as_str(), "sh" | "bash"),
            "{}:{}: a runnable block is fenced as ```sh or ```bash, not ```{}",
            block.file,
            block.line,
            block.lang
        );
        let missing = missing_commands(&block.arg);
        if !missing.is_empty() {
            failures.push(format!(
                "{}:{}: this machine has no {}: install it (e.g. `apt-get install -y {}`); \
                 a block is never skipped",
                block.file,
                block.line,
                missing.join(", "),
                missing.join(" ")
            ));
            continue;
        }
        match run_block(block) {
            Ok(took) => eprintln!("{}:{}: ok ({took:.1?})", block.file, block.line),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn readme_blocks_marked_same_as_a_file_are_that_file() {
    let blocks = all_blocks(SAME_AS);
    assert!(!blocks.is_empty(), "no document marks a block `same-as`");
    for block in blocks {
        let file = std::fs::read_to_string(repo().join(&block.arg))
            .unwrap_or_else(|e| panic!("{}:{}: {}: {e}", block.file, block.line, block.arg));
        assert!(
            block.text == file,
            "{}:{}: the block differs from {}; copy the file into {}",
            block.file,
            block.line,
            block.arg,
            block.file
        );
    }
}

#[test]
fn a_marker_without_its_block_is_an_error() {
    let text = "a\n<!-- runnable -->\n\nplain text\n";
    let err = blocks("README.md", text, RUNNABLE).unwrap_err();
    assert!(err.contains("README.md:2"), "{err}");
    let text = "<!-- runnable: needs jq -->\n```sh\necho hi\n```\n<!-- runnable -->\n```sh\ntrue\n";
    let err = blocks("README.md", text, RUNNABLE).unwrap_err();
    assert!(
        err.contains("README.md:6: the block is not closed"),
        "{err}"
    );
}

#[test]
fn postgres_is_a_need_not_a_command() {
    assert!(needs_postgres("needs curl jq postgres"));
    assert!(!needs_postgres("needs curl jq"));
    assert!(!needs_postgres("same-as: postgres"));
    assert_eq!(
        missing_commands("needs bash postgres"),
        Vec::<String>::new()
    );
}

#[test]
fn blocks_are_found_with_their_line_and_needs() {
    let text = "x\n<!-- runnable: needs curl jq -->\n```sh\necho one\necho two\n```\n\n<!-- runnable -->\n\n```bash\nfalse\n```\n";
    let found = blocks("README.md", text, RUNNABLE).unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(
        (found[0].line, found[0].lang.as_str(), found[0].arg.as_str()),
        (3, "sh", "needs curl jq")
    );
    assert_eq!(found[0].text, "echo one\necho two\n");
    assert_eq!((found[1].line, found[1].arg.as_str()), (10, ""));
    assert_eq!(
        missing_commands("needs bash no-such-command-rookery"),
        ["no-such-command-rookery"]
    );
}

#[test]
fn a_failing_block_is_named_by_its_line() {
    let text = "<!-- runnable -->\n```sh\necho visible; false\necho never\n```\n";
    let found = blocks("README.md", text, RUNNABLE).unwrap();
    let err = run_block(&found[0]).unwrap_err();
    assert!(
        err.starts_with("README.md:2: the block exited with"),
        "{err}"
    );
    assert!(err.contains("visible") && !err.contains("never"), "{err}");
}
