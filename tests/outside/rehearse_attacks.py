#!/usr/bin/env python3
"""Malformed, huge and odd `motiond rehearse` scripts: each must end (10 s) with exit 0 (ran) or
2 (refused with FILE:LINE:COL), never a panic/abort/hang, and a run's trace must keep to the
limits (fd.py). usage: tests/outside/rehearse_attacks.py OUTDIR (from the worktree; MOTIOND=binary)"""
import os, re, subprocess, sys
MOTIOND = os.environ.get('MOTIOND', 'target/release/motiond')
out = sys.argv[1] if len(sys.argv) > 1 else '/tmp/rehearse_attacks'
os.makedirs(out, exist_ok=True)
P = '{at: 0.1, request: {cmd: play, motion: wave}}'
cases = {
  'empty': '', 'null': '~', 'list': '- 1', 'no_steps': 'end: 3',
  'steps_null': 'steps:', 'steps_map': 'steps: {a: 1}',
  'at_nan': 'steps:\n  - {at: .nan, request: {cmd: status}}',
  'at_neg': 'steps:\n  - {at: -1, request: {cmd: status}}',
  'at_huge': 'steps:\n  - {at: 1e300, request: {cmd: status}}',
  'at_1e7': 'steps:\n  - {at: 1e7, request: {cmd: status}}',
  'at_unsorted': f'steps:\n  - {{at: 2, request: {{cmd: status}}}}\n  - {P}',
  'end_neg': f'end: -1\nsteps:\n  - {P}', 'end_huge': f'end: 1e300\nsteps:\n  - {P}',
  'end_nan': f'end: .nan\nsteps:\n  - {P}', 'end_before': f'end: 0.05\nsteps:\n  - {P}',
  'epoch_neg': f'epoch: -1\nsteps:\n  - {P}', 'epoch_huge': f'epoch: 1e300\nsteps:\n  - {P}',
  'two_kinds': 'steps:\n  - {at: 0.1, request: {cmd: status}, estop: pressed}',
  'no_kind': 'steps:\n  - {at: 0.1}', 'unknown_kind': 'steps:\n  - {at: 0.1, dance: yes}',
  'estop_bad': 'steps:\n  - {at: 0.1, estop: maybe}',
  'fault_unknown_dof': 'steps:\n  - {at: 0.1, fault: {dof: nope, kind: error}}',
  'fault_bad_kind': 'steps:\n  - {at: 0.1, fault: {dof: all, kind: fire}}',
  'hand_unknown': 'steps:\n  - {at: 0.1, hand: {dof: nope, to: 1, over_s: 1}}',
  'hand_nan': 'steps:\n  - {at: 0.1, hand: {dof: base_yaw, to: .nan, over_s: 1}}',
  'hand_zero_s': 'steps:\n  - {at: 0.1, request: {cmd: record, motion: h}}\n  - {at: 0.2, hand: {dof: base_yaw, to: 1, over_s: 0}}',
  'hand_huge_to': 'steps:\n  - {at: 0.1, request: {cmd: record, motion: h}}\n  - {at: 0.2, hand: {dof: base_yaw, to: 1e300, over_s: 1}}\n  - {at: 2, request: {cmd: record, stop: true}}',
  'hand_neg_s': 'steps:\n  - {at: 0.1, hand: {dof: base_yaw, to: 1, over_s: -1}}',
  'hand_huge_s': 'steps:\n  - {at: 0.1, hand: {dof: base_yaw, to: 1, over_s: 1e300}}',
  'hand_not_compliant': f'steps:\n  - {P}\n  - {{at: 0.5, hand: {{dof: base_yaw, to: 2, over_s: 0.1}}}}',
  'stall_huge': f'steps:\n  - {P}\n  - {{at: 0.5, stall_s: 1e300}}',
  'stall_neg': f'steps:\n  - {P}\n  - {{at: 0.5, stall_s: -1}}',
  'stall_nan': f'steps:\n  - {P}\n  - {{at: 0.5, stall_s: .nan}}',
  'stall_long': f'steps:\n  - {P}\n  - {{at: 0.5, stall_s: 100}}',
  'signal_hup': 'steps:\n  - {at: 0.1, signal: hup}',
  'signal_kill': 'steps:\n  - {at: 0.1, signal: kill}',
  'signal_at_0': f'steps:\n  - {{at: 0, signal: term}}\n  - {P}',
  'three_signals': f'steps:\n  - {P}\n  - {{at: 1, signal: int}}\n  - {{at: 1, signal: term}}\n  - {{at: 1, signal: int}}',
  'request_string': 'steps:\n  - {at: 0.1, request: "{\\"cmd\\": \\"play\\", \\"motion\\": \\"wave\\""}',
  'request_list': 'steps:\n  - {at: 0.1, request: [1, 2]}',
  'request_huge': 'steps:\n  - {at: 0.1, request: "' + 'x' * 2_000_000 + '"}',
  'request_nul': 'steps:\n  - {at: 0.1, request: "\\0"}',
  'many_steps': 'steps:\n' + ''.join(f'  - {{at: {i / 1000}, request: {{cmd: status}}}}\n' for i in range(20000)),
  'many_plays': 'steps:\n' + ''.join(f'  - {{at: {i / 100}, request: {{cmd: play, motion: wave, replace: true}}}}\n' for i in range(500)),
  'deep': 'steps:\n  - {at: 0.1, request: ' + '[' * 20000 + ']' * 20000 + '}',
  'anchors': 'a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]\nsteps: []',
  'bom_crlf': '\ufeffsteps:\r\n  - {at: 0.1, request: {cmd: status}}\r\n',
  'estop_then_record': 'steps:\n  - {at: 0.1, estop: pressed}\n  - {at: 0.2, request: {cmd: record, motion: e}}\n  - {at: 0.3, estop: released}\n  - {at: 0.4, request: {cmd: clear_fault}}\n  - {at: 0.5, request: {cmd: record, motion: e}}\n  - {at: 0.6, hand: {dof: base_yaw, to: 0.3, over_s: 0.5}}\n  - {at: 1.5, request: {cmd: record, stop: true}}',
  'fault_all_recording': 'steps:\n  - {at: 0.1, request: {cmd: record, motion: f}}\n  - {at: 0.2, hand: {dof: base_yaw, to: 0.3, over_s: 0.5}}\n  - {at: 0.4, fault: {dof: all, kind: no_feedback}}\n  - {at: 1, request: {cmd: record, stop: true}}\n  - {at: 1.1, fault: cleared}\n  - {at: 1.2, request: {cmd: recover}}\n  - {at: 2, request: {cmd: play, motion: f}}',
  'record_twice_same': 'steps:\n  - {at: 0.1, request: {cmd: record, motion: wave}}\n  - {at: 0.2, request: {cmd: record, motion: x}}\n  - {at: 0.3, request: {cmd: record, motion: x}}\n  - {at: 0.4, request: {cmd: record, stop: true}}\n  - {at: 0.5, request: {cmd: record, stop: true}}',
  'record_names': 'steps:\n' + ''.join(f'  - {{at: {0.1 + i / 10}, request: {{cmd: record, motion: "{n}"}}}}\n  - {{at: {0.15 + i / 10}, request: {{cmd: record, stop: true}}}}\n' for i, n in enumerate(['../x', '.hidden', 'a/b', '', 'x' * 201, 'nul\\0', 'é', 'CON', '-x', ' x', 'x.seq', '..'])),
  'reload_while_playing': f'steps:\n  - {P}\n  - {{at: 0.5, request: {{cmd: reload}}}}\n  - {{at: 0.6, request: {{cmd: pause}}}}\n  - {{at: 0.7, request: {{cmd: reload}}}}\n  - {{at: 0.8, request: {{cmd: resume}}}}',
  'sigterm_in_pause': f'steps:\n  - {P}\n  - {{at: 1, request: {{cmd: pause}}}}\n  - {{at: 1.01, signal: term}}\n  - {{at: 1.02, signal: term}}',
  'quick_stop_then_resume': f'steps:\n  - {P}\n  - {{at: 1, request: {{cmd: quick_stop}}}}\n  - {{at: 1.05, request: {{cmd: resume}}}}\n  - {{at: 1.1, request: {{cmd: play, motion: pick, replace: true}}}}',
  'disable_while_playing': f'steps:\n  - {P}\n  - {{at: 1, request: {{cmd: disable}}}}\n  - {{at: 1.5, request: {{cmd: enable}}}}\n  - {{at: 2, request: {{cmd: resume}}}}',
  'estop_in_stopping': f'steps:\n  - {P}\n  - {{at: 1, request: {{cmd: stop}}}}\n  - {{at: 1.02, estop: pressed}}\n  - {{at: 1.03, estop: released}}\n  - {{at: 1.04, estop: lost}}',
  'stall_in_stop': f'steps:\n  - {P}\n  - {{at: 1, request: {{cmd: stop}}}}\n  - {{at: 1.02, stall_s: 0.2}}',
}
flag = 0
for name, text in cases.items():
    p = os.path.join(out, name + '.yaml'); tr = os.path.join(out, name + '.csv')
    with open(p, 'w', encoding='utf-8', newline='') as f: f.write(text)
    if os.path.exists(tr): os.remove(tr)
    try:
        r = subprocess.run(['/usr/bin/time', '-f', '%M', MOTIOND, 'rehearse', p, '--config', 'config/motiond.yaml', '--trace', tr, '--report', 'json'],
                           capture_output=True, text=True, timeout=20)
        kb = int(r.stderr.strip().split('\n')[-1]); err = '\n'.join(r.stderr.strip().split('\n')[:-1]); rc = r.returncode
    except subprocess.TimeoutExpired:
        print(f'FLAG HANG {name}'); flag += 1; continue
    what = []
    if 'panicked' in err or rc not in (0, 2): what.append(f'rc {rc}')
    if kb > 1_000_000: what.append(f'{kb // 1024} MB')
    if rc == 2 and not re.search(re.escape(p) + r':\d+:\d+', err): what.append('no FILE:LINE:COL')
    line = err.split('\n')[0][:200]
    if rc == 0:
        import json
        res = json.loads(r.stdout)['result']
        line = f"ended {res['ended']} at {res['time_s']} s, state {res['state']}, violations {res['limit_violations']}"
        if res['limit_violations']: what.append('violations')
        if os.path.exists(tr) and os.path.getsize(tr) > 0:
            f = subprocess.run(['python3', 'tests/outside/fd.py', tr], capture_output=True, text=True, env=dict(os.environ, MOTIOND=MOTIOND))
            if f.returncode: what.append('fd: ' + f.stdout.strip().split('\n')[-1][:120] + ' ' + ' '.join(l for l in f.stdout.split('\n') if 'FIRST' in l)[:300])
    print(f"{'FLAG ' + ','.join(what) if what else 'ok  '} {name:22} rc {rc} {kb // 1024} MB: {line}")
    flag += bool(what)
print('flagged', flag, 'of', len(cases))
