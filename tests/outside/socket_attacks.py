"""Attacks on a running daemon's control socket (`motiond serve --dry-run --socket SOCK`).

    python3 tests/outside/socket_attacks.py SOCK huge|many|noread|vanish|two
"""
import json, os, socket, subprocess, sys, threading, time
S = sys.argv[1]
CTL = os.environ.get('MOTIONCTL', 'target/release/motionctl')
def conn():
    s = socket.socket(socket.AF_UNIX); s.connect(S); return s
def rq(s, obj, raw=None):
    s.sendall((raw if raw is not None else json.dumps(obj).encode() + b'\n'))
    buf = b''
    while not buf.endswith(b'\n'):
        d = s.recv(65536)
        if not d: return buf.decode(errors='replace') + '<EOF>'
        buf += d
    return buf.decode().strip()
def ctl(*a, timeout=30):
    t = time.time()
    try:
        p = subprocess.run([CTL, '--socket', S, *a], capture_output=True, text=True, timeout=timeout)
        return f'rc={p.returncode} {time.time()-t:.2f}s {(p.stdout+p.stderr).strip().splitlines()[0][:150] if (p.stdout+p.stderr).strip() else ""}'
    except subprocess.TimeoutExpired: return f'HANG >{timeout}s'
which = sys.argv[2]
if which == 'huge':
    s = conn()
    t = time.time()
    try:
        s.sendall(b'{"cmd":"status","x":"' + b'a' * 10_000_000 + b'"}\n')
    except Exception as e: print('send err', e)
    s.settimeout(20)
    try: print('huge line reply:', s.recv(4096)[:200], f'{time.time()-t:.1f}s')
    except Exception as e: print('huge line: no reply', e)
    try: print('after huge, same conn status:', rq(s, {'cmd': 'status'})[:80])
    except Exception as e: print('after huge conn err', e)
    print('other client status', ctl('status'))
    s2 = conn()
    for raw in [b'\n', b'\x00\x01\x02\n', b'\xff\xfe\n', b'{"cmd":"status"}{"cmd":"status"}\n', b'{"cmd":"status"\n', b'"status"\n', b'{"cmd":null}\n', b'{"cmd":"play","motion":"../../etc/passwd"}\n', b'{"cmd":"play","motion":"wave","speed":1e308}\n', b'{"cmd":"play","motion":"wave","speed":-1}\n', b'{"cmd":"play","motion":"wave","at":1e300}\n', b'{"cmd":"record","motion":"../escape"}\n', b'{"cmd":"record","motion":"' + b'x'*300 + b'"}\n', b'{"cmd":"status","cmd":"stop"}\n']:
        print(repr(raw[:60]), '->', rq(s2, None, raw)[:200])
elif which == 'many':
    held = []
    for i in range(400):
        try: held.append(conn())
        except Exception as e: print('connect', i, e); break
    print('held', len(held))
    print('status', ctl('status'))
    print('stop', ctl('stop'))
    print('play', ctl('play', 'wave'))
    for s in held: s.close()
    time.sleep(0.5)
    print('after close: play', ctl('play', 'wave'))
    print('stop', ctl('stop'))
elif which == 'noread':
    s = conn()
    s.setblocking(False)
    sent = 0
    t = time.time()
    while time.time() - t < 3:
        try: s.send(b'{"cmd":"status"}\n' * 100); sent += 100
        except BlockingIOError: time.sleep(0.01)
        except Exception as e: print('err', e); break
    print('pipelined', sent, 'while not reading; others:', ctl('status'), ctl('play', 'wave'), ctl('stop'))
    time.sleep(12)
    try:
        s.setblocking(True); s.settimeout(2); n=0
        while True:
            d = s.recv(1<<20)
            if not d: break
            n += len(d)
        print('noread: got', n, 'bytes then EOF (closed)')
    except Exception as e: print('noread: recv', e)
elif which == 'vanish':
    s = conn()
    print(rq(s, {'cmd':'enable'})[:80])
    print(rq(s, {'cmd':'stream_open','joints':['base_yaw'],'horizon_s':0.2})[:120])
    print(rq(s, {'cmd':'stream_chunk','seq':1,'positions':[[0.0],[0.05],[0.1],[0.15],[0.2],[0.25],[0.3],[0.35],[0.4],[0.45],[0.5]]})[:160])
    s.close()
    time.sleep(2)
    print('after vanish:', ctl('--json', 'status'))
    out = subprocess.run([CTL,'--socket',S,'--json','status'],capture_output=True,text=True).stdout
    d = json.loads(out); print('state', d.get('state'), 'streams', d.get('streams'), 'lv', d.get('limit_violations'))
elif which == 'two':
    # A stream belongs to the connection that opened it: B's open, chunk and close are
    # `not_owner`, A's chunks go on feeding A's stream.
    a, b = conn(), conn()
    def code(reply): return json.loads(reply).get('error', {}).get('code', 'ok')
    got = []
    def step(name, s, req, want):
        r = rq(s, req); got.append((name, code(r), want)); print(name, r[:200])
    step('A open', a, {'cmd':'stream_open','joints':['base_yaw'],'horizon_s':0.2}, 'ok')
    step('A chunk', a, {'cmd':'stream_chunk','seq':1,'positions':[[0.0],[0.02],[0.04],[0.06],[0.08],[0.1]]}, 'ok')
    step('B open', b, {'cmd':'stream_open','joints':['base_yaw'],'horizon_s':0.2}, 'not_owner')
    step('A chunk 2', a, {'cmd':'stream_chunk','seq':2,'positions':[[0.12],[0.14]]}, 'ok')
    step('B chunk 1', b, {'cmd':'stream_chunk','seq':1,'positions':[[-0.3],[-0.3]]}, 'not_owner')
    step('B close', b, {'cmd':'stream_close'}, 'not_owner')
    step('A chunk 3', a, {'cmd':'stream_chunk','seq':3,'positions':[[0.12],[0.14]]}, 'ok')
    time.sleep(3)
    out = subprocess.run([CTL,'--socket',S,'--json','status'],capture_output=True,text=True).stdout
    d = json.loads(out); print('state', d.get('state'), 'streams', d.get('streams'), 'lv', d.get('limit_violations'))
    bad = [(n, c, w) for n, c, w in got if c != w]
    print('two:', 'PASS' if not bad and d.get('limit_violations') == 0 else f'FAIL {bad}')
