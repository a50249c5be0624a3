#!/usr/bin/env bash
# The OpenAI-compatible endpoint through the official `openai` Python package (issue 19):
# installs it into its own venv (first use), starts `switchyard serve` on loopback with three
# manifests (the embedded default, tests/fixtures/manifests/chat-live.yaml whose answer streams
# live, and examples/unified-chat whose critic may reject a draft), runs tests/openai_client.py
# against them, and stops the servers.
set -euo pipefail
cd "$(dirname "$0")/.."
OPENAI_VERSION="${OPENAI_VERSION:-3.54.0}"
venv="${SWITCHYARD_VENV_DIR:-$HOME/.cache/switchyard}/venv-openai"
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('openai') != '$OPENAI_VERSION')" 2>/dev/null; then
  echo "openai_client.sh: installing openai==$OPENAI_VERSION into $venv" >&2
  mkdir -p "$(dirname "$venv")"
  [ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet "openai==$OPENAI_VERSION"
fi

bin=${SWITCHYARD_BIN:-${CARGO_TARGET_DIR:-target}/debug/switchyard}
pids=()
logs=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for l in "${logs[@]}"; do rm -f "$l"; done
}
trap cleanup EXIT
# Start `switchyard serve` with the given arguments; its base URL goes into the variable $1.
serve() {
  local var=$1 log base
  shift
  log=$(mktemp)
  logs+=("$log")
  "$bin" serve --port 0 "$@" >"$log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do
    grep -q '^listening on ' "$log" && break
    sleep 0.1
  done
  base=$(sed -n 's/^listening on //p' "$log" | head -1)
  [ -n "$base" ] || { echo "openai_client.sh: serve $* did not start" >&2; cat "$log" >&2; exit 1; }
  printf -v "$var" '%s' "$base"
}
serve default_base
serve live_base --manifest tests/fixtures/manifests/chat-live.yaml
serve critic_base --manifest examples/unified-chat/routing.yaml
"$venv/bin/python" tests/openai_client.py "$default_base" "$live_base" "$critic_base"
