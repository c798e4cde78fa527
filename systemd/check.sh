#!/usr/bin/env bash
# Checks systemd/motiond.service: `systemd-analyze verify` and the offline security rating
# (exposure must rate OK or better, i.e. at most 4.9). Needs systemd-analyze (Debian: systemd).
#
# verify insists that ExecStart's binary exists, so it checks a copy of the unit whose ExecStart
# points at a freshly built motiond (a debug build: verify only needs the file); every other line
# (ExecReload's /bin/kill too) is checked as shipped.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --bin motiond
bin="$(cd "${CARGO_TARGET_DIR:-target}/debug" && pwd)/motiond"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
sed -e "s|^ExecStart=/usr/local/bin/motiond |ExecStart=$bin |" \
    systemd/motiond.service >"$tmp/motiond.service"
grep -q "^ExecStart=$bin " "$tmp/motiond.service" || { echo "check.sh: ExecStart not found" >&2; exit 1; }
grep -q "^ExecReload=" "$tmp/motiond.service" || { echo "check.sh: ExecReload not found" >&2; exit 1; }

echo "== systemd-analyze verify"
systemd-analyze verify "$tmp/motiond.service"
echo "ok"

echo "== systemd-analyze security --offline=true"
report="$(systemd-analyze security --offline=true systemd/motiond.service)"
echo "$report" | grep -E "✗|Overall exposure"
exposure="$(echo "$report" | sed -n 's/.*Overall exposure level for motiond.service: \([0-9.]*\).*/\1/p')"
if awk -v e="$exposure" 'BEGIN { exit !(e != "" && e <= 4.9) }'; then
    echo "ok: exposure $exposure"
else
    echo "check.sh: exposure '$exposure' is above 4.9 (worse than OK)" >&2
    exit 1
fi
