#!/usr/bin/env bash
# Wake-up latency of motiond's loop beside the kernel's floor: `motiond play --report json` of an
# SR1 walk (≈ 14 s) on the simulated backend and Debian's cyclictest for as many loops take turns
# on one CPU at SCHED_FIFO 80, several pairs, and the median p99 ratio (motiond / cyclictest) is
# printed (benches/rt_latency.py; goal ≤ 1.0, exit 1 above it).
# Needs root (or CAP_SYS_NICE + CAP_IPC_LOCK and the PM QoS files) and rt-tests (stress-ng for
# --stress): apt-get update && apt-get install -y rt-tests stress-ng
#
#   benches/rt-latency.sh                       # 5 pairs at 1 kHz on CPU 1, the machine as it is
#   benches/rt-latency.sh --stress              # the same under stress-ng --cpu 2 --vm 1
#   benches/rt-latency.sh --pairs 3 --rate 4000 --cpu 2
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${MOTIOND_SHARED:-../shared}
corpus=${MOTIOND_CORPUS:-$shared/corpus}
command -v cyclictest >/dev/null || { echo "cyclictest not found: apt-get install -y rt-tests" >&2; exit 2; }
cargo build --release --bin motiond
bin=${CARGO_TARGET_DIR:-target}/release/motiond
exec python3 benches/rt_latency.py "$bin" "$corpus/seq/v2/SR1WalkPattern1.seq" \
    "$corpus/robots/sr1.skel" "$corpus/robots/sr1-joints.yaml" "$@"
