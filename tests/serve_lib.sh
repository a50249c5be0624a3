# shellcheck shell=bash
# `switchyard serve` for the shell tests. Source this file, then:
#   serve VAR [ARGS…]   start `serve --port 0 ARGS…` and put its base URL into the variable VAR
# The servers are stopped and their logs removed when the script exits (serve_stop, trapped
# here). The binary is $SWITCHYARD_BIN, or the debug build under $CARGO_TARGET_DIR.

serve_bin=${SWITCHYARD_BIN:-${CARGO_TARGET_DIR:-target}/debug/switchyard}
serve_pids=()
serve_logs=()

serve_stop() {
  for p in "${serve_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for l in "${serve_logs[@]}"; do rm -f "$l"; done
}
trap serve_stop EXIT

serve() {
  local var=$1 serve_log serve_url
  shift
  serve_log=$(mktemp)
  serve_logs+=("$serve_log")
  "$serve_bin" serve --port 0 "$@" >"$serve_log" 2>&1 &
  serve_pids+=($!)
  for _ in $(seq 1 100); do
    grep -q '^listening on ' "$serve_log" && break
    sleep 0.1
  done
  serve_url=$(sed -n 's/^listening on //p' "$serve_log" | head -1)
  [ -n "$serve_url" ] || { echo "$(basename "$0"): serve $* did not start" >&2; cat "$serve_log" >&2; exit 1; }
  printf -v "$var" '%s' "$serve_url"
}
