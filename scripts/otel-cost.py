#!/usr/bin/env python3
"""The CPU cost of OpenTelemetry export: whole-process CPU (user + system) of
`rookery bench --workload read --sessions 100 --turns 10 --rounds 3`, with `--otel` exporting
to a loopback OTLP/HTTP receiver (this script, answering 200 to every POST) against the same
without `--otel`, in interleaved pairs; prints each pair and the ratio of the medians.

Usage: scripts/otel-cost.py [--binary target/release/rookery] [--pairs 3]

The receiver runs in this process, so its own CPU is not counted; the binary's is (its
exporter's encoding and HTTP included). See docs/guide/performance.md, "OpenTelemetry export".
"""

import argparse
import http.server
import os
import resource
import statistics
import subprocess
import threading


class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def cpu_of(cmd, env):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="target/release/rookery")
    ap.add_argument("--pairs", type=int, default=3)
    a = ap.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{server.server_address[1]}"
    base = [a.binary, "bench", "--workload", "read", "--sessions", "100", "--turns", "10",
            "--rounds", "3"]
    off, on = [], []
    for i in range(a.pairs):
        off.append(cpu_of(base, env))
        on.append(cpu_of(base + ["--otel"], env))
        print(f"pair {i + 1}: off {off[-1]:.2f} s, --otel {on[-1]:.2f} s")
    m_off, m_on = statistics.median(off), statistics.median(on)
    print(f"median: off {m_off:.2f} s, --otel {m_on:.2f} s, ratio {m_on / m_off:.2f}x")


if __name__ == "__main__":
    main()
