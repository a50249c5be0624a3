#!/usr/bin/env bash
# The HTTP surfaces with a real model behind them: `switchyard serve` with examples/unified-chat
# on the llama-server that scripts/test.sh started (SWITCHYARD_LLAMA_URL), its `llm` agents
# switched to the `openai` provider through SWITCHYARD_MODEL_PROVIDER (temperature 0, at most
# 200 tokens); then
# tests/real_model_client.py drives /v1/chat/completions with the official `openai` package
# (buffered and streamed) and follows a query's live SSE event stream, and `switchyard chat`
# holds a two-turn conversation. Mechanics, not wisdom: answers parse, tokens join to the
# answer, usage is counted, every query ends.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${SWITCHYARD_LLAMA_URL:?start the model first (scripts/llama.sh; scripts/test.sh does)}"
venv="${SWITCHYARD_VENV_DIR:-$HOME/.cache/switchyard}/venv-openai" # installed by tests/openai_client.sh
# shellcheck source=tests/serve_lib.sh
source tests/serve_lib.sh
export SWITCHYARD_MODEL_PROVIDER=openai OPENAI_BASE_URL="$SWITCHYARD_LLAMA_URL"
unset OPENAI_API_KEY
# The example as shipped, its `llm` agents at temperature 0 with at most 200 tokens (its
# router artifact beside it: the intents are unchanged, so it stays current).
dir=$(mktemp -d)
cp examples/unified-chat/routing.router "$dir/"
"${SWITCHYARD_PYTHON:-python3}" - examples/unified-chat/routing.yaml "$dir/routing.yaml" <<'PY'
import sys, yaml
m = yaml.safe_load(open(sys.argv[1]))
for agent in m["agents"]:
    if "llm" in agent:
        agent["llm"]["temperature"] = 0
        agent["llm"]["max_tokens"] = min(agent["llm"].get("max_tokens", 1024), 200)
yaml.safe_dump(m, open(sys.argv[2], "w"), sort_keys=False, allow_unicode=True)
PY
manifest="$dir/routing.yaml"
trap 'serve_stop; rm -rf "$dir"' EXIT
serve base --manifest "$manifest"
"$venv/bin/python" tests/real_model_client.py "$base"

started=$(date +%s)
err=$(mktemp)
out=$(printf 'How many vacation days can I carry over?\nand for part-time staff?\n' \
  | timeout 300 "$serve_bin" chat --json --manifest "$manifest" 2>"$err") \
  || { echo "real_model.sh: switchyard chat failed:" >&2; cat "$err" >&2; exit 1; }
printf '%s\n' "$out" | python3 -c '
import json, sys
turns = [json.loads(line) for line in sys.stdin if line.strip()]
assert len(turns) == 2, f"{len(turns)} turns answered"
assert turns[0]["session_id"] == turns[1]["session_id"], "one session"
for t in turns:
    assert t["status"] in ("success", "partial"), (t["status"], t.get("caveats"))
    assert "transport error" not in json.dumps(t), t.get("caveats")
'
rm -f "$err"
echo "real_model: switchyard chat held two turns with the model in $(( $(date +%s) - started )) s"
