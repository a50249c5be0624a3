#!/usr/bin/env bash
# Lint the SAM template with cfn-lint, and confirm what cfn-lint can and cannot see in the
# deliberately broken fixtures.
#
#   scripts/cfn-lint.sh
#
# - infra/template.yaml must pass, informational checks included;
# - tests/fixtures/infra/missing-tier3-queue.yaml must FAIL: the queue is gone but still
#   referenced, which cfn-lint reports (E1010/E1020 on Tier3Queue);
# - tests/fixtures/infra/tier2-timeout-too-short.yaml must PASS: a 60 s timeout is a valid
#   template; only `switchyard infra check` knows tier 2 needs 300 s.
# - tests/fixtures/infra/with-encoder.yaml must pass: the template of a manifest that names a
#   sentence encoder, shipped as a layer (tests/infra_template.rs keeps it rendered).
# Any other outcome exits non-zero, so this file and infra/README.md stay true.
#
# cfn-lint is pinned to 1.53.3 (later releases skip SAM's transform) and installed into a
# virtualenv under ${SWITCHYARD_VENV_DIR:-$HOME/.cache/switchyard} on first use.
set -euo pipefail

CFN_LINT_VERSION=1.53.3
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${SWITCHYARD_VENV_DIR:-$HOME/.cache/switchyard}/venv-cfn-lint"
LINT="$VENV/bin/cfn-lint"

installed_version() {
    "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("cfn-lint"))' 2>/dev/null || true
}

if [[ "$(installed_version)" != "$CFN_LINT_VERSION" ]]; then
    echo "cfn-lint.sh: installing cfn-lint $CFN_LINT_VERSION into $VENV" >&2
    mkdir -p "$(dirname "$VENV")"
    [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "cfn-lint==$CFN_LINT_VERSION"
fi

cd "$ROOT"
# samtranslator needs a region to resolve pseudo parameters; any region will do for linting.
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"

failures=0
log="$(mktemp)"
trap 'rm -f "$log"' EXIT

# expect FILE pass|fail [PATTERN]: PATTERN must appear in cfn-lint's output when it fails.
expect() {
    local file="$1" want="$2" pattern="${3:-}" status=0
    "$LINT" --include-checks I -- "$file" >"$log" 2>&1 || status=$?
    if [[ "$want" == pass && $status -eq 0 ]]; then
        echo "ok    $file: passes cfn-lint, as expected"
    elif [[ "$want" == fail && $status -ne 0 && ( -z "$pattern" || -n "$(grep -E "$pattern" "$log")" ) ]]; then
        echo "ok    $file: cfn-lint rejects it, as expected ($(grep -oE '^[EWI][0-9]+' "$log" | sort -u | paste -sd' '))"
    else
        echo "FAIL  $file: expected cfn-lint to $want (exit $status)"
        sed 's/^/      /' "$log" | cut -c1-300 | head -40
        failures=$((failures + 1))
    fi
}

expect infra/template.yaml pass
expect tests/fixtures/infra/missing-tier3-queue.yaml fail "Tier3Queue"
expect tests/fixtures/infra/tier2-timeout-too-short.yaml pass
expect tests/fixtures/infra/with-encoder.yaml pass

if [[ $failures -ne 0 ]]; then
    echo "cfn-lint.sh: $failures unexpected result(s)" >&2
    exit 1
fi
echo "cfn-lint.sh: all results as expected (cfn-lint $CFN_LINT_VERSION)"
