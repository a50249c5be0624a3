#!/usr/bin/env bash
# Fuzz `switchyard serve` against docs/openapi.json with schemathesis: no 5xx, and every
# response's status, content type, headers and body conform to the document. Bounded (examples
# per operation, and a time budget) so it stays well under two minutes. One worker: with two,
# CPython 3.11's parser can fail inside hypothesis ("AST constructor recursion depth mismatch",
# a SystemError when two threads describe strategies at once), a crash of the tool, not a finding.
#
# Needs SWITCHYARD_PYTHON from scripts/pyapi.sh (scripts/test.sh sources it).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SWITCHYARD_BIN:-${CARGO_TARGET_DIR:-target}/debug/switchyard}
: "${SWITCHYARD_PYTHON:?run through scripts/test.sh, or: source scripts/pyapi.sh && pyapi_install}"
st="$(dirname "$SWITCHYARD_PYTHON")/st"
log=$(mktemp)
reports=${SCHEMATHESIS_REPORT_DIR:-$(mktemp -d)}
"$bin" serve --port 0 >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 100); do
  grep -q '^listening on ' "$log" && break
  sleep 0.1
done
base=$(sed -n 's/^listening on //p' "$log" | head -1)
[ -n "$base" ] || { echo "schemathesis: serve did not start"; cat "$log"; exit 1; }

# The document the server serves is the one in the repo.
curl -sS --fail "$base/openapi.json" | cmp - docs/openapi.json

"$st" run "$base/openapi.json" \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance \
  --header 'x-switchyard-user: schemathesis' \
  --max-examples "${SCHEMATHESIS_MAX_EXAMPLES:-40}" \
  --max-time "${SCHEMATHESIS_MAX_TIME:-60}" \
  --request-timeout 30 \
  --seed "${SCHEMATHESIS_SEED:-16}" \
  --workers 1 \
  --no-color \
  --report junit --report-dir "$reports"
echo "schemathesis: report in $reports"
