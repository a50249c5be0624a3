#!/usr/bin/env bash
# Instructions per query of the embedded pipeline (docs/performance.md#instructions-per-query), by the callgrind
# difference method: run `switchyard bench pipeline` under callgrind with LOW and HIGH queries
# at one k and one query in flight; process start, manifest, pollers and everything else that
# does not depend on the number of queries cancels out of the difference.
#
#   scripts/instructions.sh [K] [LOW] [HIGH]      (defaults: 3 200 600)
#
# Needs valgrind and a release build (`cargo build --release --workspace`). The bench runs a
# warm-up of a tenth of its queries (at least 10) before the timed ones, so the two runs differ
# by (HIGH - LOW) * 1.1 queries when both warm-ups are inside 10..500; the script divides by the
# real difference and also prints the plain (HIGH - LOW) figure.
set -euo pipefail
cd "$(dirname "$0")/.."
k=${1:-3}
low=${2:-200}
high=${3:-600}
bin=${CARGO_TARGET_DIR:-target}/release/switchyard
[[ -x "$bin" ]] || { echo "instructions.sh: $bin is missing; run cargo build --release --workspace" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is not installed" >&2; exit 1; }
[[ "$k" =~ ^[1-4]$ ]] || { echo "instructions.sh: K must be 1..4, got '$k'" >&2; exit 2; }
[[ "$low" =~ ^[0-9]+$ && "$high" =~ ^[0-9]+$ && "$low" -ge 10 && "$high" -gt "$low" ]] ||
  { echo "instructions.sh: LOW must be a number >= 10 and HIGH a larger number" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
total() { # instructions of one callgrind run of `bench pipeline --queries $1`
  valgrind --tool=callgrind --callgrind-out-file="$dir/out.$1" "$bin" bench pipeline --k "$k" --concurrency 1 \
    --queries "$1" >/dev/null 2>"$dir/log.$1"
  grep -m1 '^summary:' "$dir/out.$1" | awk '{print $2}'
}
warmup() { local w=$(( $1 / 10 )); (( w < 10 )) && w=10; (( w > 500 )) && w=500; echo "$w"; }
queries=$(( high + $(warmup "$high") - low - $(warmup "$low") ))
# Twice: on the runtime as the CLI builds it (a worker thread per core), and on one worker
# thread. With two, how often a block is freed by another thread than the one that allocated
# it (mimalloc's slower cross-thread free) depends on how the tasks happened to be scheduled,
# so two runs of one binary differ by up to ±10 k per query; with one, by less than 200 —
# the figure to compare builds with.
for threads in default 1; do
  if [[ $threads == 1 ]]; then export TOKIO_WORKER_THREADS=1; fi
  a=$(total "$low")
  b=$(total "$high")
  echo "k=$k, worker threads $threads: $a instructions at $low queries, $b at $high"
  echo "  per query: $(( (b - a) / queries )) ($queries queries apart, warm-ups included); $(( (b - a) / (high - low) )) over $((high - low))"
done
