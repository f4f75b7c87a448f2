//! Every recorded provider stream of `tests/fixtures/providers/` (real servers and gateways, see
//! each `.source` note) served byte for byte by a loopback HTTP server to a real session on the
//! OpenAI-compatible client: in one write, in one-byte writes, and with its line ends rewritten
//! to CR and to CRLF (the SSE spec allows all three). Each file's texts, thinking, tool calls,
//! usage and request status in the trace are checked against what its bytes mean
//! (`provider_replay/cases.rs`).

mod cases;
mod cases_rest;
use crate::common::replay::harness;
use crate::common::replay::server;

use std::collections::BTreeSet;
use std::path::PathBuf;

use harness::{check, replay};
use server::{Script, Writes};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/providers")
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(name)).unwrap()
}

/// Replays every case with its body passed through `rewrite`; fails listing every mismatch.
async fn replay_all(writes: Writes, rewrite: fn(Vec<u8>) -> Vec<u8>) {
    let mut bad = Vec::new();
    for case in cases::all() {
        let body = rewrite(fixture(case.file));
        let (seen, server) = replay(Script::sse(body, writes), |_| {}).await;
        bad.extend(check(case, &seen, &server));
    }
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

fn lf_to(ending: &'static [u8]) -> impl Fn(Vec<u8>) -> Vec<u8> {
    move |body| {
        let mut out = Vec::with_capacity(body.len() * 2);
        for b in body {
            if b == b'\n' {
                out.extend_from_slice(ending);
            } else {
                out.push(b);
            }
        }
        out
    }
}

#[test]
fn every_fixture_file_has_a_case() {
    let files: BTreeSet<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sse"))
        .collect();
    let cases: BTreeSet<String> = cases::all().map(|c| c.file.to_string()).collect();
    assert_eq!(files, cases);
    assert_eq!(files.len(), 48);
    for f in &files {
        assert!(
            fixtures().join(format!("{f}.source")).exists(),
            "{f} has no .source note"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recorded_stream_in_one_write() {
    replay_all(Writes::One, |b| b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recorded_stream_in_one_byte_writes() {
    replay_all(Writes::Bytewise, |b| b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recorded_stream_with_cr_line_endings() {
    replay_all(Writes::Bytewise, |b| lf_to(b"\r")(b)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recorded_stream_with_crlf_line_endings() {
    replay_all(Writes::Bytewise, |b| lf_to(b"\r\n")(b)).await;
}
