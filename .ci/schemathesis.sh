#!/usr/bin/env bash
# Fuzzes `rookery serve` with schemathesis (PyPI, pinned below) from the server's own OpenAPI
# document: a live server on 127.0.0.1 with a bearer token and a scripted model, every operation
# but the endless event stream (tested on its own in tests/suite/openapi.rs). Fails on a 5xx, an
# answer whose status, content type or body the document does not allow, or a hang (a request
# over REQUEST_TIMEOUT seconds, or the whole run over RUN_TIMEOUT).
#
#   .ci/schemathesis.sh            # from the repository root; builds the debug binary if needed
#   MAX_EXAMPLES=50 SEED=7 .ci/schemathesis.sh    # more cases, another seed
#   CHECKS=all .ci/schemathesis.sh                 # schemathesis's every check
#
# schemathesis goes into a venv under target/ (python3 -m venv). Its report (JUnit XML and the
# server's stderr) is left in target/schemathesis/.
set -euo pipefail
cd "$(dirname "$0")/.."

version=4.32.5
max_examples=${MAX_EXAMPLES:-15}
seed=${SEED:-45}
request_timeout=${REQUEST_TIMEOUT:-10}
run_timeout=${RUN_TIMEOUT:-240}
checks=${CHECKS:-not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance}

venv=target/schemathesis-venv
if [[ "$("$venv/bin/schemathesis" --version 2> /dev/null)" != *"version $version" ]]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$version"
fi

# The binary `cargo test` builds (its features unified with the tests'), so after the tests
# this is a no-op; `cargo build --bin rookery` would build it again with other features.
cargo test --quiet --no-run
root=$(pwd)
out=$root/target/schemathesis
rm -rf "$out"
mkdir -p "$out"
work=$(mktemp -d)
server_pid=
cleanup() {
    if [[ -n $server_pid ]]; then
        kill "$server_pid" 2> /dev/null || true
        wait "$server_pid" 2> /dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/home" "$work/ws" "$work/user-home"
echo "alpha" > "$work/ws/a.txt"
# Every task answers at once; a task past the script's end fails, which is an answer too.
python3 -c 'import json; print(json.dumps({"turns": [{"text": "ok"}] * 200}))' > "$work/script.json"
token=$(python3 -c 'import secrets; print(secrets.token_hex(16))')

# The server's first stdout line names its address. Sessions that name no workspace get its
# working directory, a scratch one.
mkfifo "$work/stdout"
cd "$work/ws"
HOME="$work/user-home" ROOKERY_FUZZ_TOKEN=$token "$root/target/debug/rookery" serve \
    --listen 127.0.0.1:0 --home "$work/home" --script "$work/script.json" \
    --token-env ROOKERY_FUZZ_TOKEN --sandbox off \
    < /dev/null > "$work/stdout" 2> "$out/server-stderr.txt" &
server_pid=$!
exec 3< "$work/stdout"
if ! read -r -t 30 line <&3; then
    echo "schemathesis: the server did not start (see $out/server-stderr.txt)" >&2
    exit 1
fi
# Keep reading the server's stdout so it never blocks on a full pipe.
cat <&3 > /dev/null &
base=${line#listening on }
if [[ $base != http://127.0.0.1:* ]]; then
    echo "schemathesis: unexpected first line from the server: $line" >&2
    exit 1
fi

# One authenticated request to the server (METHOD PATH [JSON]); its body on stdout; fails on
# an error status.
api() {
    BASE=$base TOKEN=$token python3 - "$@" << 'PY'
import os, sys, urllib.request
method, path = sys.argv[1], sys.argv[2]
body = sys.argv[3].encode() if len(sys.argv) > 3 else None
req = urllib.request.Request(os.environ["BASE"] + path, data=body, method=method)
req.add_header("Authorization", "Bearer " + os.environ["TOKEN"])
if body is not None:
    req.add_header("Content-Type", "application/json")
with urllib.request.urlopen(req, timeout=30) as answer:
    sys.stdout.write(answer.read().decode())
PY
}

api GET /v1/openapi.json > "$out/openapi.json"

# Real sessions for the `{id}` of most generated requests (the rest get made-up ids): without
# them nearly every operation would only meet 404 unknown_session.
sessions=()
for mode in allow-all always-ask allow-all; do
    created=$(api POST /v1/sessions "{\"workspace\": \"$work/ws\", \"approval_mode\": \"$mode\"}")
    sessions+=("$(python3 -c 'import json, sys; print(json.load(sys.stdin)["session_id"])' <<< "$created")")
done
{
    echo '[dictionaries.sessions]'
    printf 'values = [%s]\n' "$(printf '"%s", ' "${sessions[@]}")"
    echo '[parameters]'
    echo '"path.id" = { dictionary = "sessions", probability = 0.9 }'
} > "$out/schemathesis.toml"

status=0
timeout --kill-after=10 "$run_timeout" "$root/$venv/bin/schemathesis" \
    --config-file "$out/schemathesis.toml" run "$out/openapi.json" \
    --url "$base" \
    --header "Authorization: Bearer $token" \
    --exclude-path-regex '/events$' \
    --checks "$checks" \
    --max-examples "$max_examples" \
    --seed "$seed" \
    --request-timeout "$request_timeout" \
    --workers 1 \
    --report junit --report-junit-path "$out/junit.xml" || status=$?
if [[ $status == 124 || $status == 137 ]]; then
    echo "schemathesis: the run did not finish within ${run_timeout} s (a hang?)" >&2
fi
if ! kill -0 "$server_pid" 2> /dev/null; then
    echo "schemathesis: the server died during the run (see $out/server-stderr.txt)" >&2
    status=1
fi
exit "$status"
