#!/usr/bin/env bash
# Build the five Lambda binaries with cargo-lambda and report their sizes.
#
#   scripts/lambda-build.sh            # arm64, as infra/template.yaml deploys them
#   scripts/lambda-build.sh --x86-64   # x86_64 instead (not deployable with that template)
#
# Prints, per function, the size of target/lambda/<bin>/bootstrap and of its zip (what
# Lambda receives), and the wall time of the build. cargo-lambda 1.9.2 is installed into a
# virtualenv under ${SWITCHYARD_VENV_DIR:-$HOME/.cache/switchyard} on first use; it brings zig,
# which it uses as the cross linker. Honours CARGO_TARGET_DIR.
#
# When the arm64 build fails (typically: the aarch64-unknown-linux-gnu standard library is not
# installed and `rustup target add` cannot download it), the script says so, builds x86_64 to
# still measure the binaries, and exits 2: the artifacts are then NOT deployable as arm64.
set -euo pipefail

BINARIES=(intake router agent-worker synthesizer events-stream)
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

arch=arm64
case "${1:-}" in
    "") ;;
    --x86-64) arch=x86-64 ;;
    --arm64) arch=arm64 ;;
    *) echo "usage: $0 [--arm64|--x86-64]" >&2; exit 64 ;;
esac

# shellcheck source=scripts/cargo-lambda.sh
source "$ROOT/scripts/cargo-lambda.sh"
cargo_lambda_install

cd "$ROOT"
target_dir="${CARGO_TARGET_DIR:-$ROOT/target}"
bin_args=()
for bin in "${BINARIES[@]}"; do bin_args+=(--bin "$bin"); done

build() {
    local flag="--$1"
    echo "lambda-build.sh: cargo lambda build --release $flag ${bin_args[*]}" >&2
    local start end
    start=$(date +%s.%N)
    cargo lambda build --release "$flag" "${bin_args[@]}"
    end=$(date +%s.%N)
    wall=$(python3 -c "print(f'{$end - $start:.0f}')")
}

status=0
wall=0
if ! build "$arch"; then
    if [[ "$arch" != arm64 ]]; then
        echo "lambda-build.sh: the $arch build failed" >&2
        exit 1
    fi
    echo "lambda-build.sh: the arm64 build FAILED (see above); building x86_64 to measure sizes." >&2
    echo "lambda-build.sh: these x86_64 binaries cannot be deployed with Architectures: [arm64]." >&2
    arch=x86-64
    status=2
    build "$arch" || exit 1
fi

python3 - "$target_dir" "$arch" "$wall" "${BINARIES[@]}" <<'EOF'
import io, os, sys, zipfile

target_dir, arch, wall, binaries = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
print(f"\nLambda binaries ({arch}, release), built in {wall} s:")
print(f"{'function':<14}{'bootstrap':>14}{'zipped':>14}  link")
for name in binaries:
    path = os.path.join(target_dir, "lambda", name, "bootstrap")
    size = os.path.getsize(path)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(path, "bootstrap")
    zipped = len(buffer.getvalue())
    # ELF e_type (little-endian, offset 16): 2 = fixed-address executable, 3 = PIE
    # (functions/link.rs links the functions without PIE unless SWITCHYARD_PIE=1).
    with open(path, "rb") as elf:
        e_type = int.from_bytes(elf.read(18)[16:18], "little")
    link = {2: "non-PIE", 3: "PIE"}.get(e_type, f"e_type {e_type}")
    print(f"{name:<14}{size / 1e6:>11.2f} MB{zipped / 1e6:>11.2f} MB  {link}")
EOF
exit "$status"
