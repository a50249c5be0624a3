#!/usr/bin/env bash
# `cargo lambda` local invocation of the four functions against the local SQS/DynamoDB
# endpoint, with the ready payloads in events/: a question goes in through intake, the route
# job through the router, the primary's dispatch through the tier-2 agent-worker, an expired
# deadline through the synthesizer — and the output comes back partial (the tier-5 supporting
# agent was never invoked). Also: a malformed SQS record is reported as a batch item failure, and
# intake serves the OpenAI-compatible routes (the model list; a chat completion with `tools` is a
# 400 naming the parameter).
# Needs AWS_ENDPOINT_URL (scripts/test.sh starts the endpoint first).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${AWS_ENDPOINT_URL:?AWS_ENDPOINT_URL is not set: run through scripts/test.sh, which starts the local endpoint}"
# shellcheck source=scripts/cargo-lambda.sh
source scripts/cargo-lambda.sh
cargo_lambda_install

bin=${SWITCHYARD_BIN:-${CARGO_TARGET_DIR:-target}/debug/switchyard}
prefix="cl$(date +%s%N | tail -c 9)-"
setup=$("$bin" setup --backend aws --table "${prefix}table" --prefix "$prefix")
eval "$setup"
# Passed explicitly as well as inherited (cargo lambda gives variables in the workspace
# metadata precedence over both, so the metadata names none of these).
env_vars=$(printf '%s\n' "$setup" | sed -n 's/^export \(SWITCHYARD_[A-Z0-9_]*=.*\)$/\1/p' | paste -sd, -)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
work=$(mktemp -d)
cargo lambda watch --invoke-address 127.0.0.1 --invoke-port "$port" --ignore-changes --env-var "$env_vars" >"$work/watch.log" 2>&1 &
watch_pid=$!
trap 'kill $watch_pid 2>/dev/null || true; pkill -P $watch_pid 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 100); do
  (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.2
done

Q0=00000000-0000-4000-8000-000000000001
D0=00000000-0000-4000-8000-000000000002
invoke() { # function file [query] [dispatch]
  local file="$work/$(basename "$2")"
  sed -e "s/$Q0/${3:-$Q0}/g" -e "s/$D0/${4:-$D0}/g" "$2" >"$file"
  cargo lambda invoke --invoke-address 127.0.0.1 --invoke-port "$port" "$1" --data-file "$file" --output-format json
}
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1], {'json': json}, {'d': d}))" "$1"; }
fail() { echo "cargo-lambda: $*"; echo "--- cargo lambda watch log:"; tail -30 "$work/watch.log"; exit 1; }

posted=$(invoke intake events/apigw-post-query.json) || fail "intake invoke failed"
[ "$(printf '%s' "$posted" | field 'd["statusCode"]')" = 202 ] || fail "POST answered $posted"
q=$(printf '%s' "$posted" | field 'json.loads(d["body"])["query_id"]' 2>/dev/null || printf '%s' "$posted" | python3 -c 'import json,sys; print(json.loads(json.load(sys.stdin)["body"])["query_id"])')
echo "cargo-lambda: intake accepted $q"

routed=$(invoke router events/sqs-route-job.json "$q")
[ "$(printf '%s' "$routed" | field 'len(d["batchItemFailures"])')" = 0 ] || fail "router: $routed"
echo "cargo-lambda: router planned and dispatched"

events=$(invoke intake events/apigw-get-events.json "$q")
d=$(printf '%s' "$events" | python3 -c '
import json, sys
body = json.loads(json.load(sys.stdin)["body"])
print(next(e["detail"]["dispatch_id"] for e in body["events"] if e["kind"] == "dispatch" and e["detail"]["tier"] == 2))')
worked=$(invoke agent-worker events/sqs-dispatch-job.json "$q" "$d")
[ "$(printf '%s' "$worked" | field 'len(d["batchItemFailures"])')" = 0 ] || fail "agent-worker: $worked"
echo "cargo-lambda: tier-2 agent-worker recorded dispatch $d"

synth=$(invoke synthesizer events/sqs-deadline-job.json "$q")
[ "$(printf '%s' "$synth" | field 'len(d["batchItemFailures"])')" = 0 ] || fail "synthesizer: $synth"
got=$(invoke intake events/apigw-get-query.json "$q")
status=$(printf '%s' "$got" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["statusCode"], json.loads(r["body"])["status"])')
[ "$status" = "200 partial" ] || fail "GET after the deadline: $got"
echo "cargo-lambda: synthesizer fired the deadline; output is partial"

models=$(invoke intake events/apigw-list-models.json)
[ "$(printf '%s' "$models" | field 'json.loads(d["body"])["data"][0]["id"]')" = e2i ] || fail "GET /v1/models: $models"
tools="$work/tools.json"
python3 - "$tools" <<'PY'
import json, sys
e = json.load(open("events/apigw-chat-completion.json"))
body = json.loads(e["body"])
body["tools"] = [{"type": "function", "function": {"name": "lookup"}}]
e["body"] = json.dumps(body)
json.dump(e, open(sys.argv[1], "w"))
PY
refused_chat=$(cargo lambda invoke --invoke-address 127.0.0.1 --invoke-port "$port" intake --data-file "$tools" --output-format json)
[ "$(printf '%s' "$refused_chat" | field '(d["statusCode"], json.loads(d["body"])["error"]["param"])')" = "(400, 'tools')" ] || fail "chat completion with tools: $refused_chat"
echo "cargo-lambda: intake lists the manifest as a model and refuses a chat completion with tools by name"

bad="$work/bad.json"
python3 - "$bad" <<'PY'
import json, sys
e = json.load(open("events/sqs-route-job.json"))
e["Records"][0]["body"] = "{not json"
json.dump(e, open(sys.argv[1], "w"))
PY
refused=$(cargo lambda invoke --invoke-address 127.0.0.1 --invoke-port "$port" router --data-file "$bad" --output-format json)
[ "$(printf '%s' "$refused" | field 'd["batchItemFailures"][0]["itemIdentifier"]')" = local-message-1 ] || fail "malformed record: $refused"
echo "cargo-lambda: a malformed record is a batch item failure"
# The binaries cargo lambda built and ran above are linked without PIE (functions/link.rs: no
# load-time relocations, docs/performance.md#cold-start); ELF e_type 2 is a fixed-address executable.
for f in intake router agent-worker synthesizer; do
  exe="${CARGO_TARGET_DIR:-target}/debug/$f"
  [ -f "$exe" ] || fail "$exe was not built by cargo lambda watch"
  e_type=$(python3 -c 'import sys; print(int.from_bytes(open(sys.argv[1], "rb").read(18)[16:18], "little"))' "$exe")
  [ "$e_type" = 2 ] || fail "$exe is not a fixed-address executable (ELF e_type $e_type; 3 is PIE)"
done
echo "cargo-lambda: the four functions it ran are linked without PIE"
echo "cargo-lambda: 1 passed, 0 failed"
