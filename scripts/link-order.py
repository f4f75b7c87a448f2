#!/usr/bin/env python3
"""Writes link/rookery.order: the functions of the release `rookery` binary that the standard
workloads execute, run by run, most executed first, one mangled symbol per line.

The release build hands the file to the linker (`build.rs`), which places those functions
together at the start of the text, so a run maps the 3 MB or so of code it executes instead
of every 64 KiB window of the 15 MB text that holds one of them (the kernel maps a page's whole
aligned window on a fault). See docs/link-order.md.

Usage: scripts/link-order.py [--binary target/release/rookery] [--out link/rookery.order]

It runs each workload once under `valgrind --tool=callgrind`, which lists every function a run
executed with its instruction count: with the built-in model `bench` read and exec and the
README's scripted `run`; over loopback HTTP `bench` read and exec against `--serve-mock`, whose
own run (the mock server's side) is counted too. Needs valgrind and nm.
"""

import argparse
import collections
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

# The runs whose functions come first, in this order (any other run follows).
RUN_ORDER = ["http-read", "read", "mock-read", "http-exec", "exec", "mock-exec", "run"]

ENTRY = re.compile(r"(c?ob|c?fn)=\((\d+)\)(?: (.*))?")


def executed(profile, binary_name):
    """{mangled name: instructions} for the functions of `binary_name` in one callgrind file."""
    objects, functions = {}, {}
    current_object = current = None
    counts = collections.Counter()
    after_call = False
    with open(profile, encoding="utf-8", errors="replace") as f:
        for line in f:
            # The cost line after `calls=` is the callee's inclusive cost: not this function's.
            if after_call:
                after_call = False
                continue
            if line.startswith("calls="):
                after_call = True
                continue
            m = ENTRY.match(line)
            if m:
                kind, key, name = m.groups()
                table = objects if kind.endswith("ob") else functions
                if name:
                    table[key] = name.strip()
                if kind == "ob":
                    current_object = table[key]
                elif kind == "fn":
                    mine = current_object and current_object.endswith("/" + binary_name)
                    # A recursion level is named `symbol'2`: the symbol is the same.
                    current = table[key].split("'")[0] if mine else None
                    if current:
                        counts[current] += 0  # executed, whatever its own cost
                continue
            if current and line[:1] in "0123456789+-*":
                parts = line.split()
                if len(parts) >= 2 and parts[1].isdigit():
                    counts[current] += int(parts[1])
    return counts


def callgrind(out, argv, env, **popen):
    cmd = ["valgrind", "--tool=callgrind", "--demangle=no", "--fair-sched=yes", f"--callgrind-out-file={out}"]
    return subprocess.Popen(cmd + argv, env=env, **popen)


def run(out, argv, env):
    proc = callgrind(out, argv, env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if proc.wait() != 0:
        sys.exit(f"link-order: {' '.join(argv)} exited {proc.returncode}")


def with_mock(tmp, binary, workload, turns, env, body):
    """Runs `body(url)` against a `--serve-mock` that runs under callgrind itself."""
    url_file = os.path.join(tmp, f"mock-{workload}.url")
    with open(url_file, "w") as url_out:
        mock = callgrind(
            os.path.join(tmp, f"mock-{workload}.cg"),
            [binary, "bench", "--serve-mock", "--workload", workload, "--turns", turns],
            env,
            stdout=url_out,
            stderr=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + 60
        url = ""
        while not url:
            if time.monotonic() > deadline or mock.poll() is not None:
                sys.exit("link-order: the mock server did not print its URL")
            time.sleep(0.2)
            with open(url_file) as f:
                url = f.readline().strip()
        body(url)
    finally:
        mock.send_signal(signal.SIGTERM)
        mock.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default="target/release/rookery")
    parser.add_argument("--out", default="link/rookery.order")
    args = parser.parse_args()
    binary = os.path.abspath(args.binary)

    with tempfile.TemporaryDirectory(prefix="link-order-") as tmp:
        home = os.path.join(tmp, "home")
        os.mkdir(home)
        env = dict(os.environ, HOME=home)
        http = ["--provider", "openai", "--model", "bench", "--base-url"]

        def bench(name, *flags):
            run(os.path.join(tmp, f"{name}.cg"), [binary, "bench", *flags], env)

        bench("read", "--workload", "read", "--sessions", "100", "--turns", "10")
        bench("exec", "--workload", "exec", "--sessions", "4", "--turns", "5")
        tour = os.path.join(tmp, "tour")
        os.mkdir(tour)
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "tour.json")
        run(
            os.path.join(tmp, "run.cg"),
            [binary, "run", "--workspace", tour, "--home", home, "--script", script, "Show me around"],
            env,
        )
        with_mock(tmp, binary, "read", "10", env, lambda url: bench(
            "http-read", "--workload", "read", "--sessions", "100", "--turns", "10", *http, url))
        with_mock(tmp, binary, "exec", "5", env, lambda url: bench(
            "http-exec", "--workload", "exec", "--sessions", "4", "--turns", "5", *http, url))

        name = os.path.basename(binary)
        runs = {}
        for entry in sorted(os.listdir(tmp)):
            if entry.endswith(".cg") or ".cg." in entry:
                run_name = entry.split(".cg")[0]
                runs.setdefault(run_name, collections.Counter()).update(
                    executed(os.path.join(tmp, entry), name))

    nm = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True)
    text = {p[2] for p in (l.split() for l in nm.stdout.splitlines()) if len(p) == 3 and p[1] in "tTwW"}
    # One workload's functions after another's, so a run of the first (the HTTP benchmark)
    # maps only the start of the text: each run's functions not listed yet, most executed first.
    order, listed = [], set()
    for run_name in RUN_ORDER + sorted(set(runs) - set(RUN_ORDER)):
        for symbol, _ in runs.get(run_name, collections.Counter()).most_common():
            if symbol in text and symbol not in listed:
                listed.add(symbol)
                order.append(symbol)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("# Generated by scripts/link-order.py; see docs/link-order.md. One symbol per line:\n")
        f.write(f"# the functions of each run in turn ({', '.join(RUN_ORDER)}), most executed first.\n")
        f.write("\n".join(order) + "\n")
    print(f"link-order: {len(order)} functions written to {args.out}")


if __name__ == "__main__":
    main()
