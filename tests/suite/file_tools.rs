//! The file tools on real files: what they refuse (directories, FIFOs, sockets, devices, secret
//! stores by name, by inode and behind a dangling symlink, files and edits over edit_file's
//! 4 MiB), how they write (through symlinks, owner and mode kept, hard links in place), and
//! honest reads (procfs, and the guidance for lines longer than the scan cap).

use crate::common;

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt, symlink};
use std::path::Path;

use rookery::message::StopReason;
use rookery::tools::ToolReply;
use rookery::tools::profile::penguin::default_definition;
use rookery::tools::profile::penguin::edit_file::edit_file;
use rookery::tools::profile::penguin::read_file::read_file;
use rookery::tools::profile::penguin::write_file::write_file;
use serde_json::{Value, json};

fn write(ws: &Path, path: &str, content: &str) -> ToolReply {
    let args = json!({"file_path": path, "content": content});
    write_file(
        ws,
        args.as_object().unwrap(),
        &default_definition("write_file").unwrap(),
    )
}

fn edit(ws: &Path, path: &str, old: &str, new: &str) -> ToolReply {
    let args = json!({"file_path": path, "old_string": old, "new_string": new});
    edit_file(
        ws,
        args.as_object().unwrap(),
        &default_definition("edit_file").unwrap(),
    )
}

fn read(ws: &Path, args: Value) -> ToolReply {
    read_file(
        ws,
        args.as_object().unwrap(),
        &default_definition("read_file").unwrap(),
    )
}

fn read_path(ws: &Path, path: &str) -> ToolReply {
    read(ws, json!({"file_path": path}))
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn fifo_is_refused_by_every_file_tool_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let pipe = ws.join("pipe");
    nix::unistd::mkfifo(&pipe, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    // No writer is ever attached: a blocking open would hang this test.
    let text = |verb: &str| {
        format!("Cannot {verb} \"pipe\": it is a FIFO (named pipe), not a regular file.")
    };
    assert_eq!(read_path(ws, "pipe"), ToolReply::fail(text("read")));
    assert_eq!(write(ws, "pipe", "x"), ToolReply::fail(text("write")));
    assert_eq!(edit(ws, "pipe", "a", "b"), ToolReply::fail(text("edit")));
    assert!(fs::symlink_metadata(&pipe).unwrap().file_type().is_fifo());
}

#[test]
fn a_device_behind_a_symlink_is_refused_and_stays_a_device() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    // Never /dev/null itself: a link to it in a temp dir.
    symlink("/dev/null", ws.join("null")).unwrap();
    let text = |verb: &str| {
        format!("Cannot {verb} \"null\": it is a character device, not a regular file.")
    };
    assert_eq!(write(ws, "null", "x"), ToolReply::fail(text("write")));
    assert_eq!(edit(ws, "null", "a", "b"), ToolReply::fail(text("edit")));
    assert_eq!(read_path(ws, "null"), ToolReply::fail(text("read")));
    assert!(
        fs::symlink_metadata(ws.join("null"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device()
    );
    assert_eq!(entries(ws), vec!["null".to_string()]);
}

#[test]
fn socket_and_directory_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let _listener = std::os::unix::net::UnixListener::bind(ws.join("sock")).unwrap();
    fs::create_dir(ws.join("sub")).unwrap();
    let sock = |verb: &str| format!("Cannot {verb} \"sock\": it is a socket, not a regular file.");
    assert_eq!(read_path(ws, "sock"), ToolReply::fail(sock("read")));
    assert_eq!(write(ws, "sock", "x"), ToolReply::fail(sock("write")));
    assert_eq!(edit(ws, "sock", "a", "b"), ToolReply::fail(sock("edit")));
    assert!(
        fs::symlink_metadata(ws.join("sock"))
            .unwrap()
            .file_type()
            .is_socket()
    );
    assert_eq!(
        write(ws, "sub", "x"),
        ToolReply::fail("Cannot write \"sub\": it is a directory.")
    );
    assert_eq!(
        edit(ws, "sub", "a", "b"),
        ToolReply::fail("Cannot edit \"sub\": it is a directory.")
    );
    assert!(fs::metadata(ws.join("sub")).unwrap().is_dir());
}

#[test]
fn symlinks_stay_links_and_their_targets_change() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    fs::create_dir(ws.join("real")).unwrap();
    fs::write(ws.join("real/notes.md"), "alpha\nbeta\n").unwrap();
    symlink("real/notes.md", ws.join("link.md")).unwrap();
    let via = format!(
        "(written through the symlink to \"{}\")",
        ws.join("real/notes.md").display()
    );

    let r = edit(ws, "link.md", "beta", "BETA");
    assert_eq!(r.stop_reason, StopReason::Completed, "{}", r.text);
    assert!(
        r.text
            .starts_with(&format!("Replaced 1 occurrence in \"link.md\".\n{via}\n@@")),
        "{}",
        r.text
    );
    assert_eq!(
        fs::read_to_string(ws.join("real/notes.md")).unwrap(),
        "alpha\nBETA\n"
    );

    let r = write(ws, "link.md", "gamma\n");
    assert_eq!(r.stop_reason, StopReason::Completed, "{}", r.text);
    assert!(
        r.text.starts_with(&format!(
            "Overwrote \"link.md\" (1 line, 6 bytes).\n{via}\n"
        )),
        "{}",
        r.text
    );
    assert_eq!(
        fs::read_to_string(ws.join("real/notes.md")).unwrap(),
        "gamma\n"
    );
    assert!(
        fs::symlink_metadata(ws.join("link.md"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(entries(&ws.join("real")), vec!["notes.md".to_string()]);
}

#[test]
fn mode_is_kept_by_edit_and_write() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let f = ws.join("run.sh");
    fs::write(&f, "echo one\n").unwrap();
    fs::set_permissions(&f, fs::Permissions::from_mode(0o4751)).unwrap();
    assert_eq!(
        edit(ws, "run.sh", "one", "two").stop_reason,
        StopReason::Completed
    );
    assert_eq!(fs::metadata(&f).unwrap().mode() & 0o7777, 0o4751);
    assert_eq!(
        write(ws, "run.sh", "echo three\n").stop_reason,
        StopReason::Completed
    );
    assert_eq!(fs::metadata(&f).unwrap().mode() & 0o7777, 0o4751);
    assert_eq!(fs::read_to_string(&f).unwrap(), "echo three\n");
}

#[test]
fn owner_and_group_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    if fs::metadata(ws).unwrap().uid() != 0 {
        eprintln!("skipped owner_and_group_are_kept: not running as root, cannot chown to nobody");
        return;
    }
    let f = ws.join("owned.txt");
    fs::write(&f, "alpha\n").unwrap();
    std::os::unix::fs::chown(&f, Some(65534), Some(65534)).unwrap();
    assert_eq!(
        edit(ws, "owned.txt", "alpha", "ALPHA").stop_reason,
        StopReason::Completed
    );
    let meta = fs::metadata(&f).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (65534, 65534));
    assert_eq!(
        write(ws, "owned.txt", "beta\n").stop_reason,
        StopReason::Completed
    );
    let meta = fs::metadata(&f).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (65534, 65534));
    assert_eq!(fs::read_to_string(&f).unwrap(), "beta\n");
}

#[test]
fn hard_links_stay_shared_and_the_output_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    fs::write(ws.join("a.txt"), "alpha\n").unwrap();
    fs::hard_link(ws.join("a.txt"), ws.join("b.txt")).unwrap();
    let ino = fs::metadata(ws.join("a.txt")).unwrap().ino();
    let note = "(written in place: the file has 2 hard links, and all of them see the new content)";

    let r = edit(ws, "a.txt", "alpha", "ALPHA");
    assert!(
        r.text
            .starts_with(&format!("Replaced 1 occurrence in \"a.txt\".\n{note}\n@@")),
        "{}",
        r.text
    );
    assert_eq!(fs::read_to_string(ws.join("b.txt")).unwrap(), "ALPHA\n");

    let r = write(ws, "b.txt", "short\n");
    assert!(
        r.text
            .starts_with(&format!("Overwrote \"b.txt\" (1 line, 6 bytes).\n{note}\n")),
        "{}",
        r.text
    );
    assert_eq!(fs::read_to_string(ws.join("a.txt")).unwrap(), "short\n");
    for name in ["a.txt", "b.txt"] {
        let meta = fs::metadata(ws.join(name)).unwrap();
        assert_eq!((meta.ino(), meta.nlink()), (ino, 2), "{name}");
    }
    assert_eq!(entries(ws), vec!["a.txt".to_string(), "b.txt".to_string()]);
}

#[test]
fn a_hard_link_to_a_secret_store_is_refused_and_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    fs::create_dir_all(ws.join("config")).unwrap();
    fs::create_dir_all(ws.join("src")).unwrap();
    let secret = "API_KEY=sk-very-secret-value\n";
    fs::write(ws.join("config/.vault.toml"), secret).unwrap();
    fs::hard_link(ws.join("config/.vault.toml"), ws.join("src/innocent.txt")).unwrap();
    let refused = |verb: &str| {
        format!(
            "Refusing to {verb} \"src/innocent.txt\": .vault.toml holds the user's secrets and must never enter the conversation."
        )
    };

    assert_eq!(
        read_path(ws, "src/innocent.txt"),
        ToolReply::fail(refused("read"))
    );
    let r = write(ws, "src/innocent.txt", "overwritten\n");
    assert_eq!(r, ToolReply::fail(refused("write")));
    assert!(!r.text.contains("sk-very-secret"));
    let r = edit(ws, "src/innocent.txt", "API_KEY", "X");
    assert_eq!(r, ToolReply::fail(refused("edit")));
    assert!(!r.text.contains("sk-very-secret"));
    // Neither name changed.
    assert_eq!(
        fs::read_to_string(ws.join("config/.vault.toml")).unwrap(),
        secret
    );
    assert_eq!(
        fs::read_to_string(ws.join("src/innocent.txt")).unwrap(),
        secret
    );
    // By name, write and edit are refused too.
    let r = write(ws, "config/.VAULT.toml", "x");
    assert!(
        r.text
            .starts_with("Refusing to write \"config/.VAULT.toml\""),
        "{}",
        r.text
    );
    let r = edit(ws, "config/.vault.toml", "API_KEY", "X");
    assert!(
        r.text
            .starts_with("Refusing to edit \"config/.vault.toml\""),
        "{}",
        r.text
    );
    assert_eq!(
        fs::read_to_string(ws.join("config/.vault.toml")).unwrap(),
        secret
    );
}

#[test]
fn procfs_files_that_report_size_zero_are_read_until_eof() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(fs::metadata("/proc/self/status").unwrap().len(), 0);
    let r = read_path(dir.path(), "/proc/self/status");
    assert_eq!(r.stop_reason, StopReason::Completed, "{}", r.text);
    assert!(r.text.starts_with("     1\tName:\t"), "{}", r.text);
    assert!(r.text.contains("\tPid:\t"), "{}", r.text);
    // A truly empty file still says so.
    fs::write(dir.path().join("empty.txt"), "").unwrap();
    assert_eq!(
        read_path(dir.path(), "empty.txt"),
        ToolReply::ok("\"empty.txt\" is an empty file (0 lines).")
    );
}

#[test]
fn a_single_line_longer_than_the_scan_cap_gets_the_guidance() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    // 50 MB on one line: PenguinHarness's failure with guidance, not a cut line.
    fs::write(ws.join("one.txt"), vec![b'z'; 50 * 1024 * 1024]).unwrap();
    let r = read(ws, json!({"file_path": "one.txt", "offset": 1}));
    assert_eq!(
        r,
        ToolReply::fail(
            "Stopped after scanning 8 MB of \"one.txt\" without reaching the requested window (scanned 1 line). The offset is too deep or the file has extremely long lines — use shell commands (e.g. sed -n '1,2000p') for this file."
        )
    );
    // The same after some short lines, at the long line's offset.
    let mut data = b"first\nsecond\n".to_vec();
    data.extend(std::iter::repeat_n(b'q', 20 * 1024 * 1024));
    fs::write(ws.join("late.txt"), data).unwrap();
    let r = read(
        ws,
        json!({"file_path": "late.txt", "offset": 3, "limit": 5}),
    );
    assert_eq!(
        r,
        ToolReply::fail(
            "Stopped after scanning 8 MB of \"late.txt\" without reaching the requested window (scanned 3 lines). The offset is too deep or the file has extremely long lines — use shell commands (e.g. sed -n '3,7p') for this file."
        )
    );
}

#[test]
fn edit_file_refuses_a_file_over_4_mib_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    // A sparse 64 MiB file: no disk, but 64 MiB of memory (twice that with a match) if read.
    let big = ws.join("big.log");
    fs::File::create(&big)
        .unwrap()
        .set_len(64 * 1024 * 1024)
        .unwrap();
    let r = edit(ws, "big.log", "\0", "x");
    assert_eq!(
        r,
        ToolReply::fail(
            "Cannot edit \"big.log\": it is 67108864 bytes, and edit_file only edits files of at most 4194304 bytes (4 MB). Change a file this large with shell commands (exec_command, e.g. sed -i 's/old/new/' FILE), or replace its whole content with write_file."
        )
    );
    let meta = fs::metadata(&big).unwrap();
    assert_eq!((meta.len(), meta.blocks()), (64 * 1024 * 1024, 0));
    assert_eq!(entries(ws), vec!["big.log".to_string()]);

    // The cap itself is allowed, one byte more is not.
    let mut data = vec![b'a'; 4 * 1024 * 1024 - 6];
    data.extend_from_slice(b"needle");
    fs::write(ws.join("edge.txt"), &data).unwrap();
    let r = edit(ws, "edge.txt", "needle", "pin!!!");
    assert_eq!(r.stop_reason, StopReason::Completed, "{}", &r.text[..80]);
    data.push(b'\n');
    fs::write(ws.join("edge.txt"), &data).unwrap();
    let r = edit(ws, "edge.txt", "needle", "pin!!!");
    assert!(
        r.text
            .starts_with("Cannot edit \"edge.txt\": it is 4194305 bytes, and edit_file only"),
        "{}",
        r.text
    );
    assert_eq!(fs::read(ws.join("edge.txt")).unwrap(), data);
}

#[test]
fn edit_file_refuses_an_edit_that_would_grow_the_file_past_4_mib() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let content = "x\n".repeat(512 * 1024);
    fs::write(ws.join("x.txt"), &content).unwrap();
    let args = json!({"file_path": "x.txt", "old_string": "x", "new_string": "xxxxxxxx",
                      "replace_all": true});
    let r = edit_file(
        ws,
        args.as_object().unwrap(),
        &default_definition("edit_file").unwrap(),
    );
    assert_eq!(
        r,
        ToolReply::fail(
            "Cannot edit \"x.txt\": the edit would make it 4718592 bytes, and edit_file only writes files of at most 4194304 bytes (4 MB). Nothing was changed. Make a smaller change, or use shell commands (exec_command) for this one."
        )
    );
    assert_eq!(fs::read_to_string(ws.join("x.txt")).unwrap(), content);
    assert_eq!(entries(ws), vec!["x.txt".to_string()]);
}

#[test]
fn a_dangling_symlink_to_a_secret_store_is_refused_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    symlink("newdir/.project_config.toml", ws.join("dangl")).unwrap();
    symlink(".vault.toml", ws.join("dv")).unwrap();
    // A chain: the last link dangles, in another directory, the name in another case.
    fs::create_dir(ws.join("sub")).unwrap();
    symlink("deep/.VAULT.toml", ws.join("sub/last")).unwrap();
    symlink("sub/last", ws.join("chain")).unwrap();
    let refused = |verb: &str, p: &str, name: &str| {
        ToolReply::fail(format!(
            "Refusing to {verb} \"{p}\": {name} holds the user's secrets and must never enter the conversation."
        ))
    };
    let before = entries(ws);
    assert_eq!(
        write(ws, "dangl", "token = \"x\"\n"),
        refused("write", "dangl", ".project_config.toml")
    );
    assert_eq!(write(ws, "dv", "x"), refused("write", "dv", ".vault.toml"));
    assert_eq!(
        write(ws, "chain", "x"),
        refused("write", "chain", ".vault.toml")
    );
    // edit_file never creates: a dangling link is a missing file.
    for p in ["dangl", "dv", "chain"] {
        let r = edit(ws, p, "a", "b");
        assert!(
            r.text.starts_with(&format!("File not found: \"{p}\"")),
            "{}",
            r.text
        );
    }
    assert_eq!(entries(ws), before);
    assert!(!ws.join("newdir").exists());
    assert_eq!(entries(&ws.join("sub")), vec!["last".to_string()]);

    // A dangling link to an ordinary name still creates its target, directories included.
    symlink("newdir/notes.md", ws.join("ok")).unwrap();
    assert_eq!(
        write(ws, "ok", "hi\n"),
        ToolReply::ok(format!(
            "Created \"ok\" (1 line, 3 bytes).\n(written through the symlink to \"{}\")",
            ws.join("newdir/notes.md").display()
        ))
    );
    assert_eq!(
        fs::read_to_string(ws.join("newdir/notes.md")).unwrap(),
        "hi\n"
    );
    assert!(
        fs::symlink_metadata(ws.join("ok"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

mod serialized {
    //! Calls of one session on one file run in call order (through a real session).

    use super::common::*;
    use rookery::Host;
    use rookery::message::StopReason;
    use serde_json::json;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn three_edits_of_one_file_in_one_turn_all_survive_20_times() {
        let (_d, ws, home) = tempdirs();
        let rounds = 20;
        let mut turns = Vec::new();
        for i in 0..rounds {
            let file = format!("f{i}.txt");
            std::fs::write(ws.join(&file), "alpha\nbeta\ngamma\n").unwrap();
            let calls: Vec<_> = [("alpha", "ALPHA"), ("beta", "BETA"), ("gamma", "GAMMA")]
                .into_iter()
                .map(|(old, new)| {
                    json!({"name": "edit_file",
                           "arguments": {"file_path": file, "old_string": old, "new_string": new}})
                })
                .collect();
            turns.push(json!({"tool_calls": calls}));
        }
        turns.push(json!({"text": "done"}));
        let model = scripted(json!({ "turns": turns }));
        let host = Host::start(&home).await.unwrap();
        let s = host.create_session(options(&ws, model)).await.unwrap();
        let summary = s.run_task("edit them").await.unwrap();
        assert_eq!(summary.status, StopReason::Completed);
        s.close().await.unwrap();
        for i in 0..rounds {
            assert_eq!(
                std::fs::read_to_string(ws.join(format!("f{i}.txt"))).unwrap(),
                "ALPHA\nBETA\nGAMMA\n",
                "round {i}"
            );
        }
        let records = trace_records(s.trace_path());
        let outputs: Vec<String> = records
            .iter()
            .filter_map(|r| match r.as_model() {
                Some(rookery::message::ModelPayload::ToolCallOutput { output, .. }) => {
                    Some(output.clone())
                }
                _ => None,
            })
            .collect();
        assert_eq!(outputs.len(), 3 * rounds);
        for out in &outputs {
            assert!(out.starts_with("Replaced 1 occurrence in \"f"), "{out}");
        }
    }
}
