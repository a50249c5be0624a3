# shellcheck shell=bash
# A local AWS endpoint (moto server) for the DynamoDB and SQS adapter tests.
#
# Source this file, then:
#   moto_start && trap moto_stop EXIT
#   CARGO_TARGET_DIR=… cargo test -p switchyard-tests --test aws_adapters
#
# moto_start installs moto into its own virtualenv (created on first use at
# ${SWITCHYARD_VENV_DIR:-$HOME/.cache/switchyard}/venv-moto), starts moto's server on a free
# loopback port and exports AWS_ENDPOINT_URL, dummy credentials, AWS_REGION and
# SWITCHYARD_MOTO_PID. moto_stop stops that server (the caller traps EXIT).
#
# The server is `moto_server` started through scripts/moto_server.py, which handles DynamoDB
# requests one at a time: moto's transactions are not atomic across its request threads (see
# that file), and the adapter tests race transactions on purpose.

MOTO_VERSION="${MOTO_VERSION:-5.2.5}"
MOTO_SCRIPTS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

moto_venv() {
    echo "${SWITCHYARD_VENV_DIR:-$HOME/.cache/switchyard}/venv-moto"
}

# Create the venv and install moto[server] at the pinned version, unless already there.
moto_install() {
    local venv python
    venv="$(moto_venv)"
    python="${PYTHON:-python3}"
    if [ -x "$venv/bin/moto_server" ] \
        && "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('moto') != '$MOTO_VERSION')" 2>/dev/null; then
        return 0
    fi
    echo "moto.sh: installing moto[server]==$MOTO_VERSION into $venv" >&2
    mkdir -p "$(dirname "$venv")" || return 1
    if [ ! -x "$venv/bin/python" ]; then
        "$python" -m venv "$venv" || return 1
    fi
    "$venv/bin/python" -m pip install --quiet "moto[server]==$MOTO_VERSION" || return 1
}

# A free TCP port on 127.0.0.1.
moto_free_port() {
    "$(moto_venv)/bin/python" - <<'PY'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
PY
}

moto_start() {
    moto_install || { echo "moto.sh: could not install moto" >&2; return 1; }
    local venv port log i
    venv="$(moto_venv)"
    port="${MOTO_PORT:-$(moto_free_port)}"
    log="${MOTO_LOG:-${TMPDIR:-/tmp}/switchyard-moto-$port.log}"
    "$venv/bin/python" "$MOTO_SCRIPTS_DIR/moto_server.py" -H 127.0.0.1 -p "$port" >"$log" 2>&1 &
    SWITCHYARD_MOTO_PID=$!
    export SWITCHYARD_MOTO_PID
    for i in $(seq 1 100); do
        if "$venv/bin/python" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/moto-api/', timeout=1)" 2>/dev/null; then
            export AWS_ENDPOINT_URL="http://127.0.0.1:$port"
            export AWS_ACCESS_KEY_ID=test
            export AWS_SECRET_ACCESS_KEY=test
            export AWS_REGION=us-east-1
            export AWS_DEFAULT_REGION=us-east-1
            echo "moto.sh: moto_server $MOTO_VERSION on $AWS_ENDPOINT_URL (pid $SWITCHYARD_MOTO_PID, log $log)" >&2
            return 0
        fi
        if ! kill -0 "$SWITCHYARD_MOTO_PID" 2>/dev/null; then
            echo "moto.sh: moto_server exited; log:" >&2
            cat "$log" >&2
            return 1
        fi
        sleep 0.2
    done
    echo "moto.sh: moto_server did not answer on port $port within 20 s" >&2
    moto_stop
    return 1
}

moto_stop() {
    if [ -n "${SWITCHYARD_MOTO_PID:-}" ]; then
        kill "$SWITCHYARD_MOTO_PID" 2>/dev/null
        wait "$SWITCHYARD_MOTO_PID" 2>/dev/null || true
        unset SWITCHYARD_MOTO_PID
    fi
    return 0
}
