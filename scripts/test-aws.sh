#!/usr/bin/env bash
# The DynamoDB and SQS adapter tests against a local moto server on a free loopback port.
# Extra arguments go to the test binary (a test name filter, --nocapture, …).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/moto.sh
source scripts/moto.sh
moto_start
trap moto_stop EXIT
cargo test -p switchyard-tests --test aws_adapters --test aws_e2e -- "$@"
