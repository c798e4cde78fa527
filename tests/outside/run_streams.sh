#!/bin/bash
# Rehearses every script gen_streams.py wrote (DIR, default target/outside/streams) with the
# release motiond and prints per script: exit code, how the run ended, the daemon's own limit
# violations, and fd.py's finite-difference check of the commanded trace.
set -u
D=${1:-target/outside/streams}
M=${MOTIOND:-target/release/motiond}
for f in "$D"/*.yaml; do n=$(basename "$f" .yaml)
  timeout 300 "$M" rehearse "$f" --trace "$D/$n.csv" --report json > "$D/$n.json" 2> "$D/$n.err"; rc=$?
  res=$(python3 -c "import json,sys;d=json.load(open(sys.argv[1]))['result'];print(d['ended'],d['state'],'lv',d['limit_violations'],'exit',d['exit'])" "$D/$n.json" 2>/dev/null)
  fd=$(python3 tests/outside/fd.py "$D/$n.csv" 2>&1 | tail -1 | cut -c1-60)
  echo "$n rc=$rc | $res | $fd"
done
