# Sourced: puts cargo-lambda (a pinned version, installed into its own venv on first use) on
# PATH, so `cargo lambda …` works. It brings zig, which it uses as the cross linker.
CARGO_LAMBDA_VERSION=1.9.2
CARGO_LAMBDA_VENV="${SWITCHYARD_VENV_DIR:-$HOME/.cache/switchyard}/venv-cargo-lambda"

cargo_lambda_install() {
    local have
    have=$("$CARGO_LAMBDA_VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("cargo-lambda"))' 2>/dev/null || true)
    if [[ "$have" != "$CARGO_LAMBDA_VERSION" ]]; then
        echo "cargo-lambda.sh: installing cargo-lambda $CARGO_LAMBDA_VERSION into $CARGO_LAMBDA_VENV" >&2
        mkdir -p "$(dirname "$CARGO_LAMBDA_VENV")"
        [[ -x "$CARGO_LAMBDA_VENV/bin/python" ]] || python3 -m venv "$CARGO_LAMBDA_VENV"
        "$CARGO_LAMBDA_VENV/bin/pip" install --quiet "cargo-lambda==$CARGO_LAMBDA_VERSION"
    fi
    export PATH="$CARGO_LAMBDA_VENV/bin:$PATH"
}
