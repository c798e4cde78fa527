#!/usr/bin/env bash
# Wake-up latency of motiond's loop beside the kernel's floor: `motiond play --report json` of an
# SR1 walk (≈ 30 s: approach + 13.4 s of motion) and Debian's cyclictest for as many loops, both on
# CPU 1 at SCHED_FIFO 80, at 1, 4 and 8 kHz, via ../shared/tools/rt-vs-cyclictest.py.
# Needs root (or CAP_SYS_NICE + CAP_IPC_LOCK) and rt-tests: apt-get update && apt-get install -y rt-tests
# Usage: benches/rt-latency.sh [RATE...]   (default: 1000 4000 8000)
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${MOTIOND_SHARED:-../shared}
corpus=${MOTIOND_CORPUS:-$shared/corpus}
command -v cyclictest >/dev/null || { echo "cyclictest not found: apt-get install -y rt-tests" >&2; exit 2; }
cargo build --release --bin motiond
bin=${CARGO_TARGET_DIR:-target}/release/motiond
status=0
for rate in "${@:-1000 4000 8000}"; do
  for r in $rate; do
    python3 "$shared/tools/rt-vs-cyclictest.py" "$bin" "$corpus/seq/v2/SR1WalkPattern1.seq" \
      "$corpus/robots/sr1.skel" "$corpus/robots/sr1-joints.yaml" "$r" || status=1
  done
done
exit $status
