#!/usr/bin/env bash
# Instructions each function binary spends in its init (docs/performance.md#cold-start): every binary runs
# under callgrind with the environment the template gives it (table, every queue URL, tier,
# dummy credentials and region) and a Runtime API address nobody listens on, so it stops at its
# first `GET …/invocation/next`, right after init. The bare `lambda_runtime` binary
# (bench/hello) runs the same way, and each function's count is printed beside it with the
# ratio. Instruction counts are stable from run to run, unlike wall times on a shared machine.
#
#   scripts/init-instructions.sh [DIR]     (default: ${CARGO_TARGET_DIR:-target}/release)
#
# Needs valgrind and the binaries (`cargo build --release --workspace`).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-${CARGO_TARGET_DIR:-target}/release}
command -v valgrind >/dev/null || { echo "init-instructions.sh: valgrind is not installed" >&2; exit 1; }
export AWS_LAMBDA_RUNTIME_API=127.0.0.1:9 AWS_LAMBDA_FUNCTION_NAME=bench AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256
export AWS_LAMBDA_FUNCTION_VERSION='$LATEST' AWS_LAMBDA_LOG_GROUP_NAME=/aws/lambda/bench AWS_LAMBDA_LOG_STREAM_NAME=bench
export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1 AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench
export AWS_SESSION_TOKEN=bench SWITCHYARD_TABLE=switchyard-bench SWITCHYARD_TIER=2 RUST_LOG=warn
for q in ROUTE SYNTH TIER_0 TIER_1 TIER_2 TIER_3 TIER_4 TIER_5; do
  export "SWITCHYARD_QUEUE_$q=https://sqs.us-east-1.amazonaws.com/000000000000/$q"
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
bare=
printf '%-14s %14s %9s\n' binary instructions "vs bare"
for bin in bare-lambda intake router agent-worker synthesizer; do
  [[ -x "$dir/$bin" ]] || { echo "init-instructions.sh: $dir/$bin is missing; run cargo build --release --workspace" >&2; exit 1; }
  valgrind --tool=callgrind --callgrind-out-file="$out/$bin" "$dir/$bin" >/dev/null 2>"$out/$bin.log" || true
  n=$(grep -m1 '^summary:' "$out/$bin" | awk '{print $2}')
  bare=${bare:-$n}
  printf '%-14s %14s %8.1fx\n' "$bin" "$n" "$(echo "$n / $bare" | bc -l)"
done
