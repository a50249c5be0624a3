#!/usr/bin/env bash
# Smoke test of `switchyard serve`: start it on a free loopback port, POST a question with
# curl, read the output and the event stream (SSE), and stop the server.
set -euo pipefail
bin=${SWITCHYARD_BIN:-${CARGO_TARGET_DIR:-target}/debug/switchyard}
log=$(mktemp)
"$bin" serve --port 0 >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 100); do
  grep -q '^listening on ' "$log" && break
  sleep 0.1
done
base=$(sed -n 's/^listening on //p' "$log" | head -1)
[ -n "$base" ] || { echo "smoke: serve did not start"; cat "$log"; exit 1; }
user=(-H 'x-switchyard-user: smoke-user' -H 'content-type: application/json')

accepted=$(curl -sS --fail-with-body "${user[@]}" -d '{"query":"Which regions are underperforming against benchmark on market share?"}' "$base/v1/queries")
id=$(printf '%s' "$accepted" | python3 -c 'import json,sys; print(json.load(sys.stdin)["query_id"])')
echo "smoke: accepted $id"

output=$(curl -sS --fail-with-body "${user[@]}" "$base/v1/queries/$id?wait=10")
printf '%s' "$output" | python3 -c '
import json, sys
o = json.load(sys.stdin)
assert o["status"] == "success", o
assert o["agents_dispatched"] == ["gap_analyzer", "resource_optimizer"], o["agents_dispatched"]
assert o["citations"], "citations"
print("smoke: output", o["status"], o["response_confidence"], o["final_reason"])'

events=$(curl -sS -N --max-time 10 "${user[@]}" -H 'accept: text/event-stream' "$base/v1/queries/$id/events")
for kind in accepted route plan dispatch handoff synthesis final; do
  printf '%s' "$events" | grep -q "^event: $kind$" || { echo "smoke: no $kind event in the stream"; printf '%s\n' "$events"; exit 1; }
done
echo "smoke: event stream complete ($(printf '%s' "$events" | grep -c '^event: ') events)"

other=$(curl -sS -o /dev/null -w '%{http_code}' -H 'x-switchyard-user: someone-else' "$base/v1/queries/$id")
[ "$other" = 404 ] || { echo "smoke: another user read the query ($other)"; exit 1; }
bad=$(curl -sS -o /dev/null -w '%{http_code}' "${user[@]}" -d '{"query": 7}' "$base/v1/queries")
[ "$bad" = 400 ] || { echo "smoke: malformed body answered $bad"; exit 1; }
echo "smoke: 1 passed, 0 failed"
