#!/usr/bin/env bash
# The web console in headless Chromium: start `switchyard serve` on a free loopback port, check
# that `curl /` returns the console, then drive the page with Playwright (playwright-core on
# Debian's chromium): ask a question, wait for its answer and its timeline, and save a
# screenshot under target/console/ (a test artifact; see tests/console/console_test.cjs).
#
# Installs what it needs when it is missing: Debian's `chromium` (apt-get, as root) and
# playwright-core (npm, into ${SWITCHYARD_VENV_DIR:-$HOME/.cache/switchyard}/console-node).
# Nothing is skipped: without chromium or node the test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PLAYWRIGHT_VERSION=1.65.1
CHROMIUM=/usr/bin/chromium
NODE_DIR="${SWITCHYARD_VENV_DIR:-$HOME/.cache/switchyard}/console-node"
ARTIFACTS="${CARGO_TARGET_DIR:-target}/console"
bin=${SWITCHYARD_BIN:-${CARGO_TARGET_DIR:-target}/debug/switchyard}

if [ ! -x "$CHROMIUM" ]; then
  echo "console: installing chromium (apt-get)" >&2
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
fi
command -v node >/dev/null || { echo "console: node is required (Debian package nodejs)" >&2; exit 1; }
installed=$(node -p "try { require('$NODE_DIR/node_modules/playwright-core/package.json').version } catch (e) { '' }")
if [ "$installed" != "$PLAYWRIGHT_VERSION" ]; then
  echo "console: installing playwright-core@$PLAYWRIGHT_VERSION into $NODE_DIR" >&2
  mkdir -p "$NODE_DIR"
  (cd "$NODE_DIR" && npm install --no-audit --no-fund --silent "playwright-core@$PLAYWRIGHT_VERSION")
fi

# Two servers: the shipped manifest, and the scripted test manifest whose agents fail, hang and
# fall back (for the retries, fallbacks and timeouts on the timeline).
log=$(mktemp)
log2=$(mktemp)
profile=$(mktemp -d)
"$bin" serve --port 0 >"$log" 2>&1 &
pid=$!
"$bin" serve --port 0 --manifest tests/fixtures/manifests/scripted.yaml >"$log2" 2>&1 &
pid2=$!
trap 'kill $pid $pid2 2>/dev/null || true; rm -rf "$log" "$log2" "$profile"' EXIT
address() {
  for _ in $(seq 1 100); do
    grep -q '^listening on ' "$1" && break
    sleep 0.1
  done
  sed -n 's/^listening on //p' "$1" | head -1
}
base=$(address "$log")
scripted=$(address "$log2")
[ -n "$base" ] && [ -n "$scripted" ] || { echo "console: serve did not start"; cat "$log" "$log2"; exit 1; }
for b in "$base" "$scripted"; do
  case "$b" in http://127.0.0.1:*) ;; *) echo "console: serve is not on loopback: $b"; exit 1 ;; esac
done

page=$(curl -sS --fail-with-body "$base/")
printf '%s' "$page" | grep -q '<title>Switchyard console</title>' || { echo "console: / is not the console"; exit 1; }
echo "console: curl $base/ returns the console ($(printf '%s' "$page" | wc -c) bytes)"

mkdir -p "$ARTIFACTS"
CONSOLE_BASE="$base" SCRIPTED_BASE="$scripted" CHROMIUM="$CHROMIUM" PLAYWRIGHT_CORE="$NODE_DIR/node_modules/playwright-core" \
  PROFILE_DIR="$profile" SCREENSHOT="$ARTIFACTS/console.png" SCREENSHOT_FAULTS="$ARTIFACTS/console-faults.png" node tests/console/console_test.cjs
