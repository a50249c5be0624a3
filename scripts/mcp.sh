# shellcheck shell=bash
# A real MCP server for the tests: the official Python SDK (`mcp`, pinned) serving
# tests/mcp_server.py over Streamable HTTP on a free loopback port.
#
# Source this file, then:
#   mcp_start && trap mcp_stop EXIT
#   cargo test -p switchyard-tests --test mcp_python
#
# mcp_start installs the SDK into its own virtualenv (created on first use at
# ${SWITCHYARD_VENV_DIR:-$HOME/.cache/switchyard}/venv-mcp), starts the server, waits until it
# answers an MCP `initialize`, and exports SWITCHYARD_MCP_URL and SWITCHYARD_MCP_PID. mcp_stop
# stops that server (the caller traps EXIT).

MCP_SDK_VERSION="${MCP_SDK_VERSION:-2.3.0}"
MCP_SCRIPTS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

mcp_venv() {
    echo "${SWITCHYARD_VENV_DIR:-$HOME/.cache/switchyard}/venv-mcp"
}

# Create the venv and install the SDK at the pinned version, unless already there.
mcp_install() {
    local venv python
    venv="$(mcp_venv)"
    python="${PYTHON:-python3}"
    if "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '$MCP_SDK_VERSION')" 2>/dev/null; then
        return 0
    fi
    echo "mcp.sh: installing mcp==$MCP_SDK_VERSION into $venv" >&2
    mkdir -p "$(dirname "$venv")" || return 1
    if [ ! -x "$venv/bin/python" ]; then
        "$python" -m venv "$venv" || return 1
    fi
    "$venv/bin/python" -m pip install --quiet "mcp==$MCP_SDK_VERSION" || return 1
}

# Whether an MCP server answers `initialize` at $1.
mcp_answers() {
    "$(mcp_venv)/bin/python" - "$1" <<'PY' 2>/dev/null
import json, sys, urllib.request
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "mcp.sh", "version": "1"}}}).encode()
request = urllib.request.Request(sys.argv[1], data=body, headers={
    "content-type": "application/json", "accept": "application/json, text/event-stream"})
with urllib.request.urlopen(request, timeout=2) as r:
    sys.exit(0 if b'"result"' in r.read() else 1)
PY
}

mcp_start() {
    mcp_install || { echo "mcp.sh: could not install the MCP Python SDK" >&2; return 1; }
    local venv port log i
    venv="$(mcp_venv)"
    port="$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    log="${MCP_LOG:-${TMPDIR:-/tmp}/switchyard-mcp-$port.log}"
    "$venv/bin/python" "$MCP_SCRIPTS_DIR/../tests/mcp_server.py" "$port" >"$log" 2>&1 &
    SWITCHYARD_MCP_PID=$!
    export SWITCHYARD_MCP_PID
    for i in $(seq 1 100); do
        if mcp_answers "http://127.0.0.1:$port/mcp"; then
            export SWITCHYARD_MCP_URL="http://127.0.0.1:$port/mcp"
            echo "mcp.sh: MCP Python SDK $MCP_SDK_VERSION server on $SWITCHYARD_MCP_URL (pid $SWITCHYARD_MCP_PID, log $log)" >&2
            return 0
        fi
        if ! kill -0 "$SWITCHYARD_MCP_PID" 2>/dev/null; then
            echo "mcp.sh: the MCP server exited; log:" >&2
            cat "$log" >&2
            return 1
        fi
        sleep 0.2
    done
    echo "mcp.sh: the MCP server did not answer on port $port within 20 s" >&2
    mcp_stop
    return 1
}

mcp_stop() {
    if [ -n "${SWITCHYARD_MCP_PID:-}" ]; then
        kill "$SWITCHYARD_MCP_PID" 2>/dev/null
        wait "$SWITCHYARD_MCP_PID" 2>/dev/null || true
        unset SWITCHYARD_MCP_PID
    fi
    return 0
}
