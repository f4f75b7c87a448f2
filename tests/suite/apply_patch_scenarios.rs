//! codex's apply-patch scenario suite (copied to `tests/fixtures/apply-patch/`, see its
//! PROVENANCE.md), every scenario run as an `apply_patch` call of a real session with the
//! scripted model, the workspace tree compared byte for byte with the scenario's `expected/`.
//!
//! Where Rookery differs on purpose the expectation is the *input* tree and a failed call:
//! - 010 (a Move onto an existing file) and 011 (an Add of an existing file): Add and Move
//!   never overwrite in Rookery, codex overwrites;
//! - 015 (a failure after an earlier section succeeded): a failing patch changes nothing in
//!   Rookery, codex keeps the earlier sections' changes.

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use common::*;
use rookery::Host;
use rookery::message::{ModelPayload, StopReason};
use serde_json::json;

/// Scenarios whose expected outcome in Rookery is "fails, input tree unchanged".
const DIFFERS_ON_PURPOSE: [&str; 3] = [
    "010_move_overwrites_existing_destination",
    "011_add_overwrites_existing_file",
    "015_failure_after_partial_success_leaves_changes",
];

fn suite() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/apply-patch")
}

/// Every entry under `dir`: directories as `name/` with no bytes, files with their bytes.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    if !dir.exists() {
        return out;
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            if p.is_dir() {
                out.insert(format!("{rel}/"), Vec::new());
                stack.push(p);
            } else {
                out.insert(rel, fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn copy_tree(from: &Path, to: &Path) {
    for (rel, bytes) in tree(from) {
        let dest = to.join(rel.trim_end_matches('/'));
        if rel.ends_with('/') {
            fs::create_dir_all(&dest).unwrap();
        } else {
            fs::create_dir_all(dest.parent().unwrap()).unwrap();
            fs::write(dest, bytes).unwrap();
        }
    }
}

/// Scenarios that fail in codex too (their expected tree is their input tree).
fn fails_in_codex(name: &str) -> bool {
    name.contains("_rejects_") || name.contains("_requires_") || name.ends_with("_fails")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_scenario_suite_through_a_session() {
    let mut scenarios: Vec<PathBuf> = fs::read_dir(suite())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("patch.txt").is_file())
        .collect();
    scenarios.sort();
    assert_eq!(scenarios.len(), 23, "the suite has 23 scenarios");
    let (_d, root, home) = tempdirs();
    let host = Host::start(&home).await.unwrap();
    let mut differing = 0;
    for dir in &scenarios {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let ws = root.join(&name);
        fs::create_dir_all(&ws).unwrap();
        copy_tree(&dir.join("input"), &ws);
        let patch = fs::read_to_string(dir.join("patch.txt")).unwrap();
        let model = scripted(json!({"turns": [
            {"tool_calls": [{"name": "apply_patch", "arguments": {"input": patch}}]},
            {"text": "done"}
        ]}));
        let s = host.create_session(options(&ws, model)).await.unwrap();
        let summary = s.run_task("apply the patch").await.unwrap();
        assert_eq!(summary.status, StopReason::Completed, "{name}");
        s.close().await.unwrap();
        let records = trace_records(s.trace_path());
        let outs: Vec<(String, StopReason)> = records
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
        assert_eq!(outs.len(), 1, "{name}: {outs:?}");
        let (output, stop) = &outs[0];

        let purposeful = DIFFERS_ON_PURPOSE.contains(&name.as_str());
        let want = if purposeful {
            differing += 1;
            tree(&dir.join("input"))
        } else {
            tree(&dir.join("expected"))
        };
        assert_eq!(tree(&ws), want, "{name}: tree after the patch ({output})");
        if purposeful || fails_in_codex(&name) {
            assert_eq!(*stop, StopReason::Failed, "{name}: {output}");
        } else {
            assert_eq!(*stop, StopReason::Completed, "{name}: {output}");
            assert!(
                output.starts_with("Success. Updated the following files:\n"),
                "{name}: {output}"
            );
        }
        match name.as_str() {
            "005_rejects_empty_patch" => assert_eq!(output, "No files were modified."),
            "006_rejects_missing_context" => assert!(
                output.starts_with(
                    "Failed to find expected lines in modify.txt:\nmissing\n(hunk 1 of modify.txt"
                ),
                "{output}"
            ),
            "008_rejects_empty_update_hunk" => assert!(
                output.starts_with(
                    "invalid hunk at line 2, Update file hunk for path 'foo.txt' is empty"
                ),
                "{output}"
            ),
            "010_move_overwrites_existing_destination" => assert!(
                output
                    .starts_with("renamed/dir/name.txt: Move to would overwrite an existing file"),
                "{output}"
            ),
            "011_add_overwrites_existing_file" => assert!(
                output.starts_with("duplicate.txt: Add File would overwrite an existing file"),
                "{output}"
            ),
            "013_rejects_invalid_hunk_header" => assert!(
                output.starts_with(
                    "invalid hunk at line 2, '*** Frobnicate File: foo' is not a valid hunk header"
                ),
                "{output}"
            ),
            "015_failure_after_partial_success_leaves_changes" => assert!(
                output.starts_with(
                    "Failed to read file to update missing.txt: No such file or directory"
                ),
                "{output}"
            ),
            "002_multiple_operations" => assert_eq!(
                output,
                "Success. Updated the following files:\nA nested/new.txt\nD delete.txt\nM modify.txt\n"
            ),
            _ => {}
        }
    }
    assert_eq!(differing, DIFFERS_ON_PURPOSE.len());
}
