#!/usr/bin/env bash
# Smoke test of `switchyard serve`: start it on a free loopback port, POST a question with
# curl, read the output and the event stream (SSE), then the same live with a streaming example
# (token events while the query runs), and stop the servers.
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

# Streaming: with the unified-chat example (a scripted model that streams one word every 30 ms),
# an SSE client connected right after the POST receives `token` events while the query is still
# running (GET answers 202), then `final`; the tokens of the stream the synthesis event names
# spell the output's response_text exactly.
slog=$(mktemp)
"$bin" serve --port 0 --manifest examples/unified-chat/routing.yaml >"$slog" 2>&1 &
spid=$!
trap 'kill $pid $spid 2>/dev/null || true; rm -f "$log" "$slog"' EXIT
for _ in $(seq 1 100); do
  grep -q '^listening on ' "$slog" && break
  sleep 0.1
done
sbase=$(sed -n 's/^listening on //p' "$slog" | head -1)
[ -n "$sbase" ] || { echo "smoke: streaming serve did not start"; cat "$slog"; exit 1; }
python3 - "$sbase" <<'PY'
import json, sys, urllib.request
base = sys.argv[1]
hdr = {"x-switchyard-user": "smoke-user", "content-type": "application/json"}
def call(method, path, body=None, extra=None):
    req = urllib.request.Request(base + path, data=body, method=method, headers={**hdr, **(extra or {})})
    return urllib.request.urlopen(req, timeout=30)
with call("POST", "/v1/queries", json.dumps({"query": "How many vacation days can I carry over?"}).encode()) as r:
    qid = json.load(r)["query_id"]
tokens, statuses_at_first_token, kinds, event = [], [], [], None
with call("GET", f"/v1/queries/{qid}/events", extra={"accept": "text/event-stream"}) as stream:
    for raw in stream:
        line = raw.decode().rstrip("\n")
        if line.startswith("event: "):
            event = line[7:]
            kinds.append(event)
        elif line.startswith("data: ") and event == "token":
            detail = json.loads(line[6:])["detail"]
            if not tokens:
                with call("GET", f"/v1/queries/{qid}") as r:
                    statuses_at_first_token.append(r.status)
            tokens.append(detail)
        elif line.startswith("data: ") and event == "synthesis":
            winner = json.loads(line[6:])["detail"]["answer_stream"]
        if event == "final" and line == "":
            break
assert tokens, f"no token events in {kinds}"
assert statuses_at_first_token == [202], f"the query had already finished at the first token: {statuses_at_first_token}"
assert kinds[-1] == "final", kinds[-5:]
with call("GET", f"/v1/queries/{qid}?wait=10") as r:
    output = json.load(r)
text = "".join(t["text"] for t in sorted((t for t in tokens if t["stream"] == winner), key=lambda t: t["seq"]))
assert text == output["response_text"], (text, output["response_text"])
print(f"smoke: {len(tokens)} token events, the first while the query still ran (GET 202); stream {winner} spells the answer exactly")
PY
echo "smoke: 2 passed, 0 failed"
