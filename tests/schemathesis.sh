#!/usr/bin/env bash
# Fuzz `switchyard serve` against docs/openapi.json with schemathesis: no 5xx, and every
# response's status, content type, headers and body conform to the document. Two runs: one
# with the dev identity header, one against `serve --auth jwt` with a valid RS256 token, its
# key published as a JWKS on loopback (openssl makes the key and signs the token). Each run is
# bounded (examples per operation, and a time budget) so the script stays under three minutes.
# One worker: with two, CPython 3.11's parser can fail inside hypothesis ("AST constructor
# recursion depth mismatch", a SystemError when two threads describe strategies at once), a
# crash of the tool, not a finding. The per-caller rate is raised so the fuzzer's one caller
# reaches the handlers (a 429 would conform to the document, but test nothing behind it).
#
# Needs SWITCHYARD_PYTHON from scripts/pyapi.sh (scripts/test.sh sources it), and openssl.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SWITCHYARD_BIN:-${CARGO_TARGET_DIR:-target}/debug/switchyard}
: "${SWITCHYARD_PYTHON:?run through scripts/test.sh, or: source scripts/pyapi.sh && pyapi_install}"
command -v openssl >/dev/null || { echo "schemathesis: openssl is needed to sign the JWT run's token"; exit 1; }
st="$(dirname "$SWITCHYARD_PYTHON")/st"
work=$(mktemp -d)
reports=${SCHEMATHESIS_REPORT_DIR:-$(mktemp -d)}
# start_serve runs in a command substitution (a subshell), so the servers' pids go to a file
# the exit trap reads.
: >"$work/pids"
trap 'while read -r p; do kill "$p" 2>/dev/null || true; done <"$work/pids"; rm -rf "$work"' EXIT
export SWITCHYARD_SERVE_RATE_LIMIT=100000 SWITCHYARD_SERVE_RATE_BURST=100000

# Start `switchyard serve --port 0 ARGS…` logging to $work/$1.log; prints its base URL.
start_serve() {
  local name=$1 log="$work/$1.log"
  shift
  "$bin" serve --port 0 "$@" >"$log" 2>&1 &
  echo $! >>"$work/pids"
  for _ in $(seq 1 100); do
    grep -q '^listening on ' "$log" && break
    sleep 0.1
  done
  local base
  base=$(sed -n 's/^listening on //p' "$log" | head -1)
  [ -n "$base" ] || { echo "schemathesis: serve ($name) did not start" >&2; cat "$log" >&2; return 1; }
  echo "$base"
}

# Fuzz the server at $2 (reports under $reports/$1), with the extra schemathesis args after.
fuzz() {
  local name=$1 base=$2
  shift 2
  # The document the server serves is the one in the repo.
  curl -sS --fail "$base/openapi.json" | cmp - docs/openapi.json
  "$st" run "$base/openapi.json" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance \
    "$@" \
    --max-examples "${SCHEMATHESIS_MAX_EXAMPLES:-40}" \
    --max-time "${SCHEMATHESIS_MAX_TIME:-60}" \
    --request-timeout 30 \
    --seed "${SCHEMATHESIS_SEED:-16}" \
    --workers 1 \
    --no-color \
    --report junit --report-dir "$reports/$name"
}

base=$(start_serve dev)
fuzz dev "$base" --header 'x-switchyard-user: schemathesis'

# --auth jwt: an RSA key, its JWKS served on loopback, and a token signed with it.
b64url() { base64 -w0 | tr '+/' '-_' | tr -d '='; }
openssl genrsa -out "$work/key.pem" 2048 2>/dev/null
modulus=$(openssl rsa -in "$work/key.pem" -noout -modulus | sed 's/^Modulus=//')
n=$(python3 -c 'import base64, sys; print(base64.urlsafe_b64encode(bytes.fromhex(sys.argv[1])).decode().rstrip("="))' "$modulus")
mkdir "$work/jwks"
printf '{"keys":[{"kty":"RSA","kid":"schemathesis-1","alg":"RS256","use":"sig","n":"%s","e":"AQAB"}]}' "$n" \
  >"$work/jwks/jwks.json"
python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$work/jwks" >"$work/jwks.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  grep -q 'Serving HTTP' "$work/jwks.log" && break
  sleep 0.1
done
jwks_port=$(sed -n 's/.* port \([0-9]*\).*/\1/p' "$work/jwks.log" | head -1)
[ -n "$jwks_port" ] || { echo "schemathesis: the JWKS server did not start"; cat "$work/jwks.log"; exit 1; }
issuer="https://issuer.schemathesis.test"
header=$(printf '{"alg":"RS256","typ":"JWT","kid":"schemathesis-1"}' | b64url)
payload=$(printf '{"iss":"%s","aud":"switchyard","sub":"schemathesis","roles":"analyst","iat":%d,"exp":%d}' \
  "$issuer" "$(date +%s)" "$(($(date +%s) + 3600))" | b64url)
signature=$(printf '%s.%s' "$header" "$payload" | openssl dgst -sha256 -sign "$work/key.pem" -binary | b64url)
token="$header.$payload.$signature"
base=$(start_serve jwt --auth jwt --jwt-issuer "$issuer" --jwt-audience switchyard \
  --jwt-jwks-url "http://127.0.0.1:$jwks_port/jwks.json")
# The token is accepted before the fuzzer starts (a refused token would fuzz only the 401s).
status=$(curl -sS -o /dev/null -w '%{http_code}' -H "authorization: Bearer $token" "$base/v1/models")
[ "$status" = 200 ] || { echo "schemathesis: serve --auth jwt answered $status to the signed token"; exit 1; }
fuzz jwt "$base" --header "authorization: Bearer $token"
echo "schemathesis: reports in $reports/dev and $reports/jwt"
