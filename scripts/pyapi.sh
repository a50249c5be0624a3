# shellcheck shell=bash
# Python tools the tests drive: PyYAML (a second YAML parser for the shipped manifests),
# openapi-spec-validator (the OpenAPI document) and schemathesis (fuzzes `switchyard serve`
# against that document).
#
# Source this file, then `pyapi_install`: it creates the venv (first use) at
# ${SWITCHYARD_VENV_DIR:-$HOME/.cache/switchyard}/venv-api with pinned versions and exports
# SWITCHYARD_PYTHON, the venv's python, which tests/portable_manifests.rs and tests/openapi.rs
# run, and tests/schemathesis.sh uses.

PYAPI_SCHEMATHESIS_VERSION="${PYAPI_SCHEMATHESIS_VERSION:-4.32.5}"
PYAPI_OPENAPI_SPEC_VALIDATOR_VERSION="${PYAPI_OPENAPI_SPEC_VALIDATOR_VERSION:-0.9.0}"
PYAPI_PYYAML_VERSION="${PYAPI_PYYAML_VERSION:-6.0.3}"

pyapi_venv() {
    echo "${SWITCHYARD_VENV_DIR:-$HOME/.cache/switchyard}/venv-api"
}

pyapi_install() {
    local venv python
    venv="$(pyapi_venv)"
    python="${PYTHON:-python3}"
    if ! "$venv/bin/python" - <<PY 2>/dev/null
import importlib.metadata as m, sys
want = {"schemathesis": "$PYAPI_SCHEMATHESIS_VERSION",
        "openapi-spec-validator": "$PYAPI_OPENAPI_SPEC_VALIDATOR_VERSION",
        "PyYAML": "$PYAPI_PYYAML_VERSION"}
sys.exit(any(m.version(k) != v for k, v in want.items()))
PY
    then
        echo "pyapi.sh: installing schemathesis, openapi-spec-validator and PyYAML into $venv" >&2
        mkdir -p "$(dirname "$venv")" || return 1
        if [ ! -x "$venv/bin/python" ]; then
            "$python" -m venv "$venv" || return 1
        fi
        "$venv/bin/python" -m pip install --quiet \
            "schemathesis==$PYAPI_SCHEMATHESIS_VERSION" \
            "openapi-spec-validator==$PYAPI_OPENAPI_SPEC_VALIDATOR_VERSION" \
            "PyYAML==$PYAPI_PYYAML_VERSION" || return 1
    fi
    export SWITCHYARD_PYTHON="$venv/bin/python"
}
