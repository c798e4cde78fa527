#!/usr/bin/env python3
"""A flight-recorder MCAP (a `motionctl dump`, a fault's dump, `--trace X.mcap`) as the trace CSV
fd.py reads: tick, time, state, per DOF commanded/velocity/acceleration/measured.
usage: mcap2csv.py IN.mcap OUT.csv   (needs the `mcap` package)"""
import csv, json, sys
from mcap.reader import make_reader
loop, joints = {}, {}
with open(sys.argv[1], 'rb') as f:
    for _, channel, message in make_reader(f).iter_messages():
        v = json.loads(message.data)
        if channel.topic == '/motiond/loop': loop[v['tick']] = v
        elif channel.topic == '/motiond/joints': joints[v['tick']] = v
ticks = sorted(set(loop) & set(joints))
dofs = [k for k in joints[ticks[0]] if k not in ('tick', 'time')]
with open(sys.argv[2], 'w', newline='') as out:
    w = csv.writer(out)
    w.writerow(['tick', 'time', 'state'] + [f'{d}.{c}' for d in dofs for c in ('commanded', 'velocity', 'acceleration', 'measured')])
    for t in ticks:
        j = joints[t]
        w.writerow([t, j['time'], loop[t]['state']] + [j[d][c] for d in dofs for c in ('commanded', 'velocity', 'acceleration', 'measured')])
gaps = sum(1 for a, b in zip(ticks, ticks[1:]) if b != a + 1)
print(f'{len(ticks)} ticks {ticks[0]}..{ticks[-1]}, {gaps} gaps, states {sorted(set(loop[t]["state"] for t in ticks))}')
