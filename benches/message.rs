//! OmniMessage serialize/parse, and trace appends through the `TraceActor` next to a raw
//! `write(2)` loop on an `O_APPEND` file in the same group.

use std::io::Write;
use std::sync::Arc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use rookery::message::{OmniMessage, build};
use rookery::trace::writer::{TraceActor, TraceArgs, TraceMsg, TraceStats};

fn sample() -> OmniMessage {
    build::tool_call_output(
        "call_12",
        "     1\tline 1: the quick brown fox jumps over the lazy dog\n     2\tline 2: the quick brown fox",
        Vec::new(),
        rookery::message::StopReason::Completed,
    )
}

fn message(c: &mut Criterion) {
    let msg = sample();
    let line = msg.to_json();
    let mut g = c.benchmark_group("omnimessage");
    g.bench_function("serialize", |b| {
        b.iter(|| std::hint::black_box(msg.to_json()))
    });
    g.bench_function("parse", |b| {
        b.iter(|| std::hint::black_box(OmniMessage::from_json(&line).ok()))
    });
    g.finish();
}

const BATCH: usize = 1000;

fn trace_append(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    // A 240-byte record.
    let mut msg = build::user_text("", None);
    let pad = 240 - msg.to_json().len();
    msg = build::user_text("x".repeat(pad), None);
    let line = msg.to_json();
    assert_eq!(line.len(), 240);
    let msg = Arc::new(msg);

    let mut g = c.benchmark_group("trace_append_1000x240B");
    g.bench_function("raw_write", |b| {
        let path = dir.path().join("raw.jsonl");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .expect("open");
        let mut buf = line.clone().into_bytes();
        buf.push(b'\n');
        b.iter(|| {
            for _ in 0..BATCH {
                f.write_all(&buf).expect("write");
            }
        })
    });
    g.bench_function("trace_actor", |b| {
        let path = dir.path().join("actor.jsonl");
        let actor = rt
            .block_on(ractor::Actor::spawn(
                None,
                TraceActor,
                TraceArgs {
                    path,
                    stats: Arc::new(TraceStats::default()),
                },
            ))
            .expect("spawn")
            .0;
        b.iter_batched(
            || (),
            |_| {
                rt.block_on(async {
                    for _ in 0..BATCH {
                        let _ = actor.cast(TraceMsg::Append(msg.clone()));
                    }
                    // Wait until every record is written (no fsync: same as the raw loop).
                    let _ = ractor::call!(actor, TraceMsg::Written);
                })
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, message, trace_append);
criterion_main!(benches);
