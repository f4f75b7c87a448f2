//! The file tools under a rename flipper: another thread swaps a symlink (or a directory) by
//! `rename(2)` as fast as it can while hundreds of calls run, 8 rounds each, and not one call
//! may show a secret store, write one, or read or create anything outside the workspace.
//! penguin's read_file, write_file and edit_file and apply_patch are called in this process on
//! real files; openvaala's read_file runs in the real binary with a scripted model.

use crate::common::cli::{Sandbox, output_of, read_records, s};

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use rookery::message::StopReason;
use rookery::tools::ToolReply;
use rookery::tools::profile::penguin::apply_patch::apply_text;
use rookery::tools::profile::penguin::default_definition;
use rookery::tools::profile::penguin::edit_file::edit_file;
use rookery::tools::profile::penguin::read_file::read_file;
use rookery::tools::profile::penguin::write_file::write_file;
use serde_json::{Value, json};

const ROUNDS: usize = 8;
/// Calls per round in this process (cheap) and in the binary (one scripted turn).
const CALLS: usize = 800;
const BINARY_CALLS: usize = 300;
const SECRET: &str = "SECRET-MARKER-7f3a";

/// What the flipper renames over its target in turn.
enum Swap {
    /// A symlink with this target.
    Link(PathBuf),
    /// A regular file with these contents.
    File(&'static str),
}

/// A thread renaming each of `swaps` over `at` in turn until dropped; it counts its renames.
struct Flipper {
    stop: Arc<AtomicBool>,
    flips: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Flipper {
    fn start(at: &Path, swaps: Vec<Swap>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flips = Arc::new(AtomicU64::new(0));
        let (at, stop2, flips2) = (at.to_path_buf(), stop.clone(), flips.clone());
        let staging = at.with_file_name(".flipper-staging");
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                for swap in &swaps {
                    let _ = fs::remove_file(&staging);
                    match swap {
                        Swap::Link(target) => symlink(target, &staging),
                        Swap::File(contents) => fs::write(&staging, contents),
                    }
                    .unwrap_or_else(|e| panic!("{}: {e}", staging.display()));
                    fs::rename(&staging, &at).unwrap_or_else(|e| {
                        panic!("{} -> {}: {e}", staging.display(), at.display())
                    });
                    flips2.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        // The calls start once the swapping has (a wait on the thread's first renames).
        while flips.load(Ordering::Relaxed) < 2 {
            std::thread::yield_now();
        }
        Flipper {
            stop,
            flips,
            thread: Some(thread),
        }
    }

    /// Stops the thread; how many renames it made.
    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        self.flips.load(Ordering::Relaxed)
    }
}

fn call(
    tool: fn(
        &Path,
        &serde_json::Map<String, Value>,
        &rookery::tools::ToolDefinitionConfig,
    ) -> ToolReply,
    name: &str,
    ws: &Path,
    args: Value,
) -> ToolReply {
    tool(
        ws,
        args.as_object().unwrap(),
        &default_definition(name).unwrap(),
    )
}

#[test]
fn read_file_never_shows_a_secret_store_through_a_swapped_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    fs::write(ws.join("plain.txt"), "nothing to see\n").unwrap();
    fs::write(ws.join(".vault.toml"), format!("key = \"{SECRET}\"\n")).unwrap();
    for round in 0..ROUNDS {
        let flipper = Flipper::start(
            &ws.join("x.txt"),
            vec![
                Swap::Link("plain.txt".into()),
                Swap::Link(".vault.toml".into()),
            ],
        );
        let (mut shown, mut refused) = (0, 0);
        for _ in 0..CALLS {
            let r = call(read_file, "read_file", ws, json!({"file_path": "x.txt"}));
            assert!(!r.text.contains(SECRET), "round {round}: {}", r.text);
            match r.stop_reason {
                StopReason::Completed => shown += 1,
                _ if r.text.starts_with("Refusing to read") => refused += 1,
                _ => {}
            }
        }
        let flips = flipper.stop();
        assert!(flips > 0, "the flipper never ran");
        eprintln!("round {round}: {shown} shown, {refused} refused, {flips} flips");
    }
}

#[test]
fn write_file_and_edit_file_never_touch_or_show_a_secret_store_through_a_swap() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let vault = format!("key = \"{SECRET}\"\n");
    fs::write(ws.join(".vault.toml"), &vault).unwrap();
    for round in 0..ROUNDS {
        // x.txt is in turn a plain file and a symlink to the secret store.
        let flipper = Flipper::start(
            &ws.join("x.txt"),
            vec![
                Swap::File("key = \"plain\"\n"),
                Swap::Link(".vault.toml".into()),
            ],
        );
        for i in 0..CALLS {
            let r = if i % 2 == 0 {
                call(
                    write_file,
                    "write_file",
                    ws,
                    json!({"file_path": "x.txt", "content": "key = \"written\"\n"}),
                )
            } else {
                call(
                    edit_file,
                    "edit_file",
                    ws,
                    json!({"file_path": "x.txt", "old_string": "key = ", "new_string": "k = "}),
                )
            };
            assert!(!r.text.contains(SECRET), "round {round}: {}", r.text);
        }
        assert!(flipper.stop() > 0, "the flipper never ran");
        assert_eq!(fs::read_to_string(ws.join(".vault.toml")).unwrap(), vault);
    }
}

#[test]
fn apply_patch_add_file_never_creates_outside_through_a_swapped_directory() {
    let dir = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(dir.path()).unwrap();
    let (ws, outside) = (root.join("ws"), root.join("outside"));
    fs::create_dir_all(ws.join("inside")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    for round in 0..ROUNDS {
        // `d` leads in turn to a directory in the workspace and to one outside it.
        let flipper = Flipper::start(
            &ws.join("d"),
            vec![Swap::Link("inside".into()), Swap::Link(outside.clone())],
        );
        let mut added = 0;
        for i in 0..CALLS {
            let patch = format!(
                "*** Begin Patch\n*** Add File: d/sub{}/f-{round}-{i}.txt\n+x\n*** End Patch\n",
                i % 3
            );
            let r = apply_text(&ws, &patch, &mut |_| Ok(()));
            if r.stop_reason == StopReason::Completed {
                added += 1;
            }
        }
        assert!(flipper.stop() > 0, "the flipper never ran");
        let leaked: Vec<_> = walk(&outside);
        assert!(
            leaked.is_empty(),
            "round {round}: created outside: {leaked:?}"
        );
        eprintln!("round {round}: {added} added inside");
    }
}

/// Every entry under `dir`, recursively.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if fs::symlink_metadata(&path).unwrap().is_dir() {
            out.extend(walk(&path));
        }
        out.push(path);
    }
    out
}

#[test]
fn openvaala_read_file_never_reads_outside_through_a_swapped_symlink() {
    for round in 0..ROUNDS {
        let sb = Sandbox::new();
        let ws = sb.ws();
        fs::write(ws.join("inside.txt"), "inside the workspace\n").unwrap();
        let outside = sb.file("outside.txt", &format!("{SECRET}\n"));
        let calls: Vec<Value> = (0..BINARY_CALLS)
            .map(|_| json!({"name": "read_file", "arguments": {"path": "x.txt"}}))
            .collect();
        let script = sb.script(&json!({"turns": [{"tool_calls": calls}, {"text": "done"}]}));
        let flipper = Flipper::start(
            &ws.join("x.txt"),
            vec![Swap::Link("inside.txt".into()), Swap::Link(outside)],
        );
        let out = sb.run(&["--tools-profile", "openvaala", "--script", s(&script), "go"]);
        assert!(flipper.stop() > 0, "the flipper never ran");
        out.expect_code(0);
        let records = read_records(&sb.trace());
        let mut inside = 0;
        for i in 0..BINARY_CALLS {
            let output = output_of(&records, &format!("call_{i}"))["output"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            assert!(!output.contains(SECRET), "round {round}: {output}");
            inside += usize::from(output.contains("inside the workspace"));
        }
        let trace = fs::read_to_string(sb.trace()).unwrap();
        assert!(!trace.contains(SECRET), "round {round}: the trace holds it");
        eprintln!("round {round}: {inside} read inside");
    }
}

#[test]
fn the_image_tools_never_block_on_a_fifo_swapped_in_after_the_look() {
    use rookery::tools::image_source::{LoadError, load_image};
    use tokio_util::sync::CancellationToken;

    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_path_buf();
    // A 1x1 PNG.
    let mut png = Vec::new();
    image::DynamicImage::new_rgb8(1, 1)
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .unwrap();
    fs::write(ws.join("one.png"), &png).unwrap();
    nix::unistd::mkfifo(
        &ws.join("pipe"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cancel = CancellationToken::new();
    let mut hung = 0;
    for round in 0..ROUNDS {
        let flipper = Flipper::start(
            &ws.join("x.png"),
            vec![Swap::Link("one.png".into()), Swap::Link("pipe".into())],
        );
        let (mut loaded, mut refused) = (0, 0);
        for _ in 0..CALLS / 4 {
            let call = load_image("x.png", &ws, &cancel);
            // Generous: a call reads at most one small file.
            match rt.block_on(async { tokio::time::timeout(Duration::from_secs(10), call).await }) {
                Ok(Ok(_)) => loaded += 1,
                Ok(Err(LoadError::Failed(text))) => {
                    assert!(text.ends_with("path is not a file."), "{text}");
                    refused += 1;
                }
                Ok(Err(other)) => panic!("round {round}: {other:?}"),
                Err(_) => hung += 1,
            }
            if hung > 0 {
                break;
            }
        }
        flipper.stop();
        if hung > 0 {
            // Release the blocked open so the runtime can stop.
            let _ = fs::OpenOptions::new().write(true).open(ws.join("pipe"));
        }
        assert_eq!(hung, 0, "round {round}: a call blocked on the FIFO");
        eprintln!("round {round}: {loaded} loaded, {refused} refused");
    }
    rt.shutdown_timeout(Duration::from_secs(1));
}
