#!/usr/bin/env python3
"""Edge values into every key of every shipped drive-family example, one at a time, through
`motiond check` (which loads the buses as `serve` does). Flags a panic/abort, a hang (10 s), an
exit other than 0/2, and a refusal that names no FILE:LINE:COL.
usage: tests/outside/config_attacks.py [CONFIG...]   (run from the worktree; MOTIOND=binary)"""
import glob, os, re, subprocess, sys
MOTIOND = os.environ.get('MOTIOND', 'target/release/motiond')
EDGES = ['0', '-1', '-0.0', '1e308', '-1e308', '.nan', '.inf', '-.inf', '""', '18446744073709551616',
         '4294967296', '65536', '256', '0x7fffffff', 'true', 'null', '[]', '{}', '"é\u202e"', '1.5', '127', '128', '2047', '2048']
pat = re.compile(r'(?<![\w.])([a-z_][a-z0-9_]*): ([^,}\n#{\[][^,}\n#]*?)(?=\s*[,}\n#])')
configs = sys.argv[1:] or sorted(glob.glob('config/examples/*.yaml'))
bad = 0; runs = 0
for cfg in configs:
    text = open(cfg).read()
    d = os.path.dirname(cfg)
    for m in pat.finditer(text):
        line_start = text.rfind('\n', 0, m.start()) + 1
        if text[line_start:m.start()].lstrip().startswith('#'): continue
        for v in EDGES:
            mutated = text[:m.start(2)] + v + text[m.end(2):]
            tmp = os.path.join(d, '_attack.yaml')
            open(tmp, 'w').write(mutated)
            runs += 1
            try:
                p = subprocess.run([MOTIOND, 'check', 'config/motions/wave.seq', '--config', tmp],
                                   capture_output=True, text=True, timeout=10)
            except subprocess.TimeoutExpired:
                bad += 1; print(f'HANG {cfg} {m.group(1)}: {v}'); continue
            err = p.stderr.strip()
            what = None
            if 'panicked' in err or p.returncode < 0 or p.returncode > 2: what = f'rc {p.returncode}'
            elif p.returncode == 2 and not re.search(r'_attack\.yaml:\d+:\d+', err): what = 'no FILE:LINE:COL'
            if what:
                bad += 1; print(f'{what}: {cfg} {m.group(1)}: {m.group(2)} -> {v}\n    ' + err.replace('\n', '\n    ')[:600])
    try: os.remove(os.path.join(d, '_attack.yaml'))
    except FileNotFoundError: pass
print(f'{runs} runs, {bad} flagged')
