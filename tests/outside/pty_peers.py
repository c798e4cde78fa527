#!/usr/bin/env python3
"""Serial buses (DYNAMIXEL, Feetech, SLCAN) on a pseudo-terminal whose peer misbehaves: silent,
garbage, echo, a flood, hang-up. `motiond serve` must refuse to start or fault within seconds,
name the bus/device and what to do, never panic/hang; SIGTERM must end it.
usage: tests/outside/pty_peers.py (from the worktree; MOTIOND=binary)"""
import os, pty, re, signal, subprocess, sys, tempfile, threading, time
MOTIOND = os.environ.get('MOTIOND', 'target/release/motiond')
def peer(kind, fd, stop):
    while not stop.is_set():
        try:
            if kind == 'silent': os.read(fd, 4096)
            elif kind == 'garbage': os.read(fd, 4096); os.write(fd, os.urandom(64))
            elif kind == 'echo': os.write(fd, os.read(fd, 4096))
            elif kind == 'flood': os.write(fd, os.urandom(4096))
            elif kind == 'hangup': os.read(fd, 64); os.close(fd); return
        except OSError:
            time.sleep(0.01)
flag = 0
cfgs = dict((k, v) for k, v in {'dynamixel': 'config/examples/dynamixel.yaml', 'feetech': 'config/examples/so101.yaml', 'slcan': 'config/examples/slcan.yaml'}.items() if len(sys.argv) < 2 or k in sys.argv[1:])
tmp = tempfile.mkdtemp()
for fam, cfg in cfgs.items():
    text = open(cfg).read()
    if 'library:' not in text: text = text.replace('\ncontrol:', '\nmotion: {library: ../motions}\ncontrol:')
    for kind in ['silent', 'garbage', 'echo', 'flood', 'hangup']:
        m, s = pty.openpty(); name = os.ttyname(s)
        c = os.path.join('config/examples', '_pty.yaml')
        open(c, 'w').write(re.sub(r'device: \S+', f'device: {name}', text))
        stop = threading.Event(); t = threading.Thread(target=peer, args=(kind, m, stop), daemon=True); t.start()
        sock = os.path.join(tmp, 's.sock')
        p = subprocess.Popen([MOTIOND, 'serve', '--config', c, '--socket', sock], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            out, _ = p.communicate(timeout=15); how = f'exit {p.returncode}'
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGTERM)
            try: out, _ = p.communicate(timeout=10); how = f'ran 15 s, SIGTERM -> exit {p.returncode}'
            except subprocess.TimeoutExpired: p.kill(); out, _ = p.communicate(); how = 'HANG after SIGTERM'
        stop.set(); os.close(s)
        try: os.close(m)
        except OSError: pass
        last = [l for l in out.strip().split('\n') if l][-3:]
        bad = 'panicked' in out or 'HANG' in how or (p.returncode or 0) < 0
        flag += bad
        print(f"{'FLAG' if bad else 'ok  '} {fam:9} {kind:8} {how}: " + ' | '.join(l[-260:] for l in last))
os.remove(os.path.join('config/examples', '_pty.yaml'))
print('flagged', flag)
