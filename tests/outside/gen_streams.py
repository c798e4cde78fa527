"""Writes the outside tester's stream scenarios as `motiond rehearse` scripts (JSON is YAML).

    python3 tests/outside/gen_streams.py [DIR]   # default target/outside/streams
    tests/outside/run_streams.sh [DIR]          # rehearse each, check its trace by finite differences
"""
import json, math, os
import sys
D = sys.argv[1] if len(sys.argv) > 1 else 'target/outside/streams'
os.makedirs(D, exist_ok=True)
J = ['base_yaw', 'shoulder_pitch']
def rows(t0, n=3, dt=1/30):
    return [[round(0.6*math.sin(1.2*(t0+i*dt)),5), round(0.4*math.sin(1.7*(t0+i*dt)),5)] for i in range(n)]
def chunks(start_at=0.15, n=20, seq0=1, t00=0.0):
    out = []
    for k in range(n):
        t0 = t00 + k*0.1
        out.append({'at': round(start_at + k*0.1, 3), 'request': {'cmd': 'stream_chunk', 'seq': seq0+k, 't0': round(t0,5), 'positions': rows(t0)}})
    return out
OPEN = {'at': 0.05, 'request': {'cmd': 'stream_open', 'joints': J, 'rate_hz': 30, 'horizon_s': 0.1}}
def w(name, steps, **top):
    d = dict(top); d['steps'] = sorted(steps, key=lambda s: s['at'])
    open(f'{D}/{name}.yaml', 'w').write(json.dumps(d))   # JSON is YAML
base = [OPEN] + chunks()
def at(t, **kw): d = {'at': t}; d.update(kw); return d
def req(t, **r): return {'at': t, 'request': r}
w('baseline', base)
w('nan_row', base + [req(1.0, cmd='stream_chunk', seq=100, t0=2.0, positions=[[float('nan'), 0.0]])])
w('inf_t0', base + [req(1.0, cmd='stream_chunk', seq=100, t0=float('inf'), positions=rows(2.0))])
w('out_of_limit', base + [req(1.0, cmd='stream_chunk', seq=100, t0=2.0, positions=[[3.5, 0.0],[3.6,0.0]])])
w('leap', base + [req(1.0, cmd='stream_chunk', seq=100, t0=1.0, positions=[[-2.0, 1.5],[-2.0,1.5],[-2.0,1.5]])])
w('t0_past', base + [req(1.0, cmd='stream_chunk', seq=100, t0=0.0, positions=rows(0.0))])
w('t0_far_future', base + [req(1.0, cmd='stream_chunk', seq=100, t0=1e9, positions=rows(2.0))])
w('t0_negative', base + [req(1.0, cmd='stream_chunk', seq=100, t0=-5.0, positions=rows(0.0))])
w('t0_huge_finite', base + [req(1.0, cmd='stream_chunk', seq=100, t0=1e300, positions=rows(2.0))])
w('dt_zero', base + [req(1.0, cmd='stream_chunk', seq=100, t0=1.0, dt=0.0, positions=rows(1.0))])
w('dt_negative', base + [req(1.0, cmd='stream_chunk', seq=100, t0=1.0, dt=-0.1, positions=rows(1.0))])
w('dt_tiny', base + [req(1.0, cmd='stream_chunk', seq=100, t0=1.0, dt=1e-12, positions=rows(1.0))])
w('dt_huge', base + [req(1.0, cmd='stream_chunk', seq=100, t0=1.0, dt=1e12, positions=rows(1.0))])
w('seq_repeat', base + [req(1.0, cmd='stream_chunk', seq=5, t0=1.0, positions=rows(1.0))])
w('seq_gap', [OPEN] + chunks(n=5) + chunks(start_at=0.65, n=10, seq0=1000, t00=0.5))
w('seq_negative', base + [req(1.0, cmd='stream_chunk', seq=-1, t0=1.0, positions=rows(1.0))])
w('seq_u64max', base + [req(1.0, cmd='stream_chunk', seq=18446744073709551615, t0=2.0, positions=rows(2.0)), req(1.05, cmd='stream_chunk', seq=18446744073709551615, t0=2.1, positions=rows(2.1))])
w('seq_float', base + [req(1.0, cmd='stream_chunk', seq=1.5, t0=1.0, positions=rows(1.0))])
w('wrong_width', base + [req(1.0, cmd='stream_chunk', seq=100, t0=1.0, positions=[[0.1],[0.1,0.2,0.3]])])
w('empty_positions', base + [req(1.0, cmd='stream_chunk', seq=100, t0=1.0, positions=[])])
w('empty_row', base + [req(1.0, cmd='stream_chunk', seq=100, t0=1.0, positions=[[]])])
big = [[0.3*math.sin(0.001*i), 0.0] for i in range(3000)]
w('big_chunk', [OPEN, req(0.1, cmd='stream_chunk', seq=1, t0=0.0, dt=0.001, positions=big)])
w('chunk_no_open', chunks())
w('open_bad_joint', [req(0.05, cmd='stream_open', joints=['nope'])] )
w('open_dup_joint', [req(0.05, cmd='stream_open', joints=['base_yaw','base_yaw']), req(0.1, cmd='stream_chunk', seq=1, t0=0.0, positions=[[0.1,0.2]])])
w('open_rate0', [req(0.05, cmd='stream_open', joints=J, rate_hz=0)])
w('open_rate_nan', [req(0.05, cmd='stream_open', joints=J, rate_hz=float('nan'))])
w('open_horizon_neg', [req(0.05, cmd='stream_open', joints=J, horizon_s=-1)])
w('open_horizon_big', [req(0.05, cmd='stream_open', joints=J, horizon_s=10), req(0.1, cmd='stream_chunk', seq=1, t0=0.0, positions=rows(0))])
w('open_empty_joints', [req(0.05, cmd='stream_open', joints=[]), req(0.1, cmd='stream_chunk', seq=1, positions=[[]])])
w('open_twice_mid', base + [req(1.0, cmd='stream_open', joints=J, rate_hz=30, horizon_s=0.1), req(1.05, cmd='stream_chunk', seq=1, t0=0.0, positions=[[-0.5,-0.3],[-0.5,-0.3]])])
w('open_other_joints_mid', base + [req(1.0, cmd='stream_open', joints=['elbow_pitch'], rate_hz=30, horizon_s=0.1), req(1.05, cmd='stream_chunk', seq=1, t0=0.0, positions=[[0.5],[0.5]])])
for ev, step in [('estop', {'estop': 'pressed'}), ('fault', {'fault': {'dof': 'base_yaw', 'kind': 'error'}}), ('sigterm', {'signal': 'term'}), ('sigint2', None), ('stall', {'stall_s': 0.3}), ('hold', {'request': {'cmd': 'hold'}}), ('stop', {'request': {'cmd': 'stop'}}), ('pause', {'request': {'cmd': 'pause'}}), ('disable', {'request': {'cmd': 'disable'}}), ('close', {'request': {'cmd': 'stream_close'}}), ('play', {'request': {'cmd': 'play', 'motion': 'wave'}}), ('play_replace', {'request': {'cmd': 'play', 'motion': 'wave', 'replace': True}}), ('record', {'request': {'cmd': 'record', 'motion': 'tk'}}), ('fault_lost', {'fault': {'dof': 'all', 'kind': 'no_feedback'}}), ('estop_lost', {'estop': 'lost'})]:
    for phase, t in [('early', 0.16), ('mid', 0.93), ('starved', 2.3)]:
        s = list(base)
        if step is None:
            s += [at(t, signal='int'), at(t+0.02, signal='int')]
        else:
            s.append(dict({'at': t}, **step))
        s.append(req(t+0.5, cmd='stream_chunk', seq=500, t0=round(t+0.45,3), positions=rows(t+0.45)))
        s.append(req(t+3.0, cmd='status'))
        w(f'ev_{ev}_{phase}', s)
# resume after starvation and event during resume
s = list(base) + [req(3.0, cmd='stream_chunk', seq=100, t0=2.95, positions=[[0.4,0.3],[0.5,0.3],[0.6,0.3]])]
w('resume', s)
w('resume_estop', s + [at(3.02, estop='pressed')])
w('resume_fault', s + [at(3.02, fault={'dof': 'shoulder_pitch', 'kind': 'stall'})])
# flood: one chunk every tick-ish
fl = [OPEN] + [req(round(0.1+0.001*k,4), cmd='stream_chunk', seq=k+1, t0=round(0.001*k*3,4), positions=rows(0.003*k, 3)) for k in range(800)]
w('flood', fl)
# chunk whose rows approach a position limit fast
w('near_limit', [OPEN, req(0.1, cmd='stream_chunk', seq=1, t0=0.0, dt=0.1, positions=[[0.0,0.0],[0.2,0.0],[0.5,0.0],[1.0,0.0],[1.6,0.0],[2.2,0.0],[2.75,0.0],[2.79,0.0]])])
# stream while playing, paused
w('stream_during_play', [req(0.05, cmd='play', motion='wave'), at(0.3, request=OPEN['request'])] + chunks(start_at=0.4))
w('stream_during_pause', [req(0.05, cmd='play', motion='wave'), req(0.3, cmd='pause'), at(0.35, request=OPEN['request'])] + chunks(start_at=0.4))
w('stream_during_teachin', [req(0.05, cmd='record', motion='tk'), at(0.1, hand={'dof': 'base_yaw', 'to': 0.8, 'over_s': 1}), at(0.3, request=OPEN['request'])] + chunks(start_at=0.4) + [req(3, cmd='record', stop=True)])
# malformed raw lines
w('raw_garbage', [OPEN, at(0.1, request='{"cmd":"stream_chunk","seq":1,"positions":[[1e999,0]]}'), at(0.2, request='{"cmd":"stream_chunk","seq":2,"positions":[[0.1,0.1]],"t0":-0.0}'), at(0.3, request='{"cmd":"stream_chunk","seq":3,"positions":"x"}'), at(0.4, request='[]'), at(0.5, request='{"cmd":"stream_chunk","seq":4,"positions":[[0.1,0.1]],"extra":1}')])

# A far-future chunk (aborted the daemon before the 60 s bound), a long one, and a value a
# client cannot send (YAML .nan goes as null).
for t in [100, 1000, 10000, 1e9]:
    w(f'far_{t:g}', base + [req(1.0, cmd='stream_chunk', seq=100, t0=float(t), positions=rows(2.0))])
w('long_chunk', [OPEN, req(0.1, cmd='stream_chunk', seq=1, t0=0.0, dt=1.0, positions=[[0.001*i, 0.0] for i in range(1000)])])
open(f'{D}/nan_null.yaml', 'w').write("steps:\n  - {at: 0.05, request: {cmd: stream_open, joints: [base_yaw]}}\n  - {at: 0.1, request: {cmd: stream_chunk, seq: 1, positions: [[.nan]]}}\n  - {at: 0.2, request: {cmd: stream_chunk, seq: 2, t0: .inf, positions: [[0.1]]}}\n")
