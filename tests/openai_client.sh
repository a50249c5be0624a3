#!/usr/bin/env bash
# The OpenAI-compatible endpoint through the official `openai` Python package (issue 19):
# installs it into its own venv (first use), starts `switchyard serve` on loopback with three
# manifests (the embedded default, tests/fixtures/manifests/chat-live.yaml whose answer streams
# live, and examples/unified-chat whose critic may reject a draft), runs tests/openai_client.py
# against them, and stops the servers.
set -euo pipefail
cd "$(dirname "$0")/.."
OPENAI_VERSION="${OPENAI_VERSION:-3.54.0}"
venv="${SWITCHYARD_VENV_DIR:-$HOME/.cache/switchyard}/venv-openai"
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('openai') != '$OPENAI_VERSION')" 2>/dev/null; then
  echo "openai_client.sh: installing openai==$OPENAI_VERSION into $venv" >&2
  mkdir -p "$(dirname "$venv")"
  [ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet "openai==$OPENAI_VERSION"
fi

# shellcheck source=tests/serve_lib.sh
source tests/serve_lib.sh
serve default_base
serve live_base --manifest tests/fixtures/manifests/chat-live.yaml
serve critic_base --manifest examples/unified-chat/routing.yaml
"$venv/bin/python" tests/openai_client.py "$default_base" "$live_base" "$critic_base"
