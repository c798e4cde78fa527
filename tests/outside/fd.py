#!/usr/bin/env python3
"""Finite-difference check of a motiond trace CSV against limits.
usage: fd.py TRACE.csv [--model skel] [--override dof:vel:acc ...]"""
import csv, json, os, subprocess, sys
args = sys.argv[1:]
trace = args[0]
model = 'config/demo-arm.skel'
over = {'elbow_pitch': (2.0, 6.0)}
i = 1
while i < len(args):
    if args[i] == '--model': model = args[i+1]; i += 2
    elif args[i] == '--override':
        d, v, a = args[i+1].split(':'); over[d] = (float(v), float(a)); i += 2
    elif args[i] == '--no-override': over = {}; i += 1
    else: raise SystemExit('bad arg ' + args[i])
m = json.loads(subprocess.check_output([os.environ.get('MOTIOND', 'target/release/motiond'), 'inspect', 'model', model]))
lim = {}
for sk in m['skeletons']:
    for d in sk['dofs']:
        lim[d['name']] = [d['position'], d['velocity'][1], d['acceleration'][1]]
for d, (v, a) in over.items():
    if d in lim: lim[d][1] = min(lim[d][1], v); lim[d][2] = min(lim[d][2], a)
rows = list(csv.DictReader(open(trace)))
dofs = [c[:-len('.commanded')] for c in rows[0] if c.endswith('.commanded')]
dt = float(rows[1]['time']) - float(rows[0]['time'])
worst = {}
bad = 0
for d in dofs:
    if d not in lim: continue
    (lo, hi), vl, al = lim[d]
    p = [float(r[d + '.commanded']) for r in rows]
    st = [r['state'] for r in rows]
    mv = ma = 0; first = None
    for k in range(len(p)):
        if not (lo - 1e-9 <= p[k] <= hi + 1e-9):
            bad += 1
            if first is None: first = (k, 'pos', p[k], st[k])
        skip = lambda *ks: any(st[j] in ('recording', 'disabled') for j in ks)
        if k >= 1 and not skip(k-1, k):
            v = (p[k] - p[k-1]) / dt
            if abs(v) > mv: mv = abs(v); mvk = k
            if abs(v) > vl * (1 + 1e-6) + 1e-9:
                bad += 1
                if first is None: first = (k, 'vel', v, st[k-1] + '->' + st[k])
        if k >= 2 and not skip(k-2, k-1, k):
            a = (p[k] - 2*p[k-1] + p[k-2]) / dt / dt
            if abs(a) > ma: ma = abs(a); mak = k
            if abs(a) > al * (1 + 1e-6) + 1e-6:
                bad += 1
                if first is None: first = (k, 'acc', a, st[k-2] + '->' + st[k-1] + '->' + st[k])
    print(f"{d}: max|v| {mv:.4f}/{vl} (tick {mvk if mv else '-'}), max|a| {ma:.3f}/{al} (tick {mak if ma else '-'})" + (f"  FIRST VIOLATION {first}" if first else ''))
print('VIOLATIONS', bad, 'ticks', len(rows), 'states', sorted(set(r['state'] for r in rows)))
sys.exit(1 if bad else 0)
