#!/usr/bin/env bash
# scripts/llama.sh's start-up check against two stand-in servers: one that dies at start with a
# segmentation fault (as a build with faulting CPU kernels does in its warm-up decode), and one
# that answers /health but fails the one-token completion. Each must fail llama_start with one
# line naming the log and the CPU, export no URL, and leave no process behind.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/llama.sh
source scripts/llama.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Stand-ins for the build and the model: llama_start runs "$(llama_bin_dir)/llama-server".
llama_install() { return 0; }
llama_model() { echo "$work/model.gguf"; }
llama_bin_dir() { echo "$work/bin"; }
llama_free_port() { python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1]); s.close()"; }
mkdir -p "$work/bin"

expect_failure() {
    local what=$1 pattern=$2 err rc=0
    err="$work/$what.err"
    # In a subshell under `set -e`, as scripts/test.sh runs it: the failure must still be told.
    set +e
    (set -e; LLAMA_LOG="$work/$what.log" llama_start; echo "SWITCHYARD_LLAMA_URL=$SWITCHYARD_LLAMA_URL" >"$work/started") 2>"$err"
    rc=$?
    set -e
    if [ "$rc" -eq 0 ]; then
        echo "llama_start: $what: started, expected a failure"; cat "$err"; exit 1
    fi
    if [ -e "$work/started" ]; then
        echo "llama_start: $what: exported a URL after a failure"; exit 1
    fi
    if [ "$(wc -l <"$err")" -ne 1 ] || ! grep -qE "$pattern" "$err" \
        || ! grep -q "log: $work/$what.log" "$err" || ! grep -q 'cpu: .*flags: ' "$err"; then
        echo "llama_start: $what: expected one line matching '$pattern' with the log and the CPU, got:"
        cat "$err"; exit 1
    fi
    echo "llama_start: $what: $(cat "$err")"
}

# Dies at start: a segmentation fault after a line of log.
cat >"$work/bin/llama-server" <<'SH'
#!/usr/bin/env bash
echo "init: llama threadpool init, n_threads = 1"
kill -SEGV $$
SH
chmod +x "$work/bin/llama-server"
expect_failure crash 'exited at start with status 139 \(signal SEGV\)'

# Healthy, but the completion fails (HTTP 500); llama_start must stop it.
cat >"$work/bin/llama-server" <<'SH'
#!/usr/bin/env python3
import http.server, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def do_POST(self):
        self.send_response(500)
        self.end_headers()
http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
SH
expect_failure no-completion 'did not answer a one-token completion \(HTTP 500\)'
if pgrep -f "$work/bin/llama-server" >/dev/null; then
    echo "llama_start: the stand-in server is still running after the failed start"; exit 1
fi
echo "llama_start: both failures reported"
