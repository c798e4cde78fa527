#!/usr/bin/env python3
"""Hostile .seq files through `motiond check` (the library's reader and the proof): deep
nesting, huge numbers, NaN, unicode, CRLF, BOM, anchors, huge counts. Flags a panic/abort, a hang
(10 s), more than 1 GB, an exit other than 0/1/2 and a refusal naming no FILE:LINE:COL.
usage: tests/outside/seq_attacks.py OUTDIR   (run from the worktree; MOTIOND=binary)"""
import os, re, subprocess, sys
MOTIOND = os.environ.get('MOTIOND', 'target/release/motiond')
out = sys.argv[1] if len(sys.argv) > 1 else '/tmp/seq_attacks'
os.makedirs(out, exist_ok=True)
base = open('config/motions/wave.seq').read()
head = 'type: CompositeSeq\ncontent: BodyMotion\nformatVersion: 2\nframeRate: {rate}\nnumFrames: {n}\ncomponents:\n  - type: MultiValueSeq\n    content: JointDisplacement\n    numParts: {parts}\n    frames:\n'
def seq(rows, rate=100, parts=6, n=None):
    return head.format(rate=rate, n=len(rows) if n is None else n, parts=parts) + ''.join('      - [ ' + ', '.join(r) + ' ]\n' for r in rows)
ok_rows = [['0'] * 5 + ['0.01'] for _ in range(10)]
cases = {
  'bom': '\ufeff' + base,
  'crlf': base.replace('\n', '\r\n'),
  'cr_only': base.replace('\n', '\r'),
  'bom_crlf': '\ufeff' + base.replace('\n', '\r\n'),
  'nul': base.replace('frameRate', 'frame\0Rate'),
  'nan': seq(ok_rows[:5] + [['.nan'] * 5 + ['0.01']] + ok_rows[:4]),
  'inf': seq(ok_rows[:5] + [['.inf'] * 5 + ['0.01']] + ok_rows[:4]),
  'huge': seq(ok_rows[:5] + [['1e308'] * 5 + ['0.01']] + ok_rows[:4]),
  'huge_int': seq(ok_rows[:5] + [['1' + '0' * 400] * 5 + ['0.01']] + ok_rows[:4]),
  'subnormal': seq([['4.9e-324'] * 5 + ['0.01']] * 10),
  'negzero': seq([['-0.0'] * 5 + ['0.01']] * 10),
  'hex': seq([['0x10'] * 5 + ['0.01']] * 10),
  'strings': seq([['"0"'] * 5 + ['0.01']] * 10),
  'bool': seq([['true'] * 5 + ['0.01']] * 10),
  'null': seq([['~'] * 5 + ['0.01']] * 10),
  'rate0': seq(ok_rows, rate=0),
  'rate_neg': seq(ok_rows, rate=-100),
  'rate_nan': seq(ok_rows, rate='.nan'),
  'rate_tiny': seq(ok_rows, rate='1e-300'),
  'rate_huge': seq(ok_rows, rate='1e300'),
  'rate_1e9': seq(ok_rows, rate='1e9'),
  'numframes_lie': seq(ok_rows, n=10 ** 18),
  'numframes_neg': seq(ok_rows, n=-5),
  'parts_huge': seq(ok_rows, parts=10 ** 12),
  'parts_0': seq(ok_rows, parts=0),
  'ragged': seq(ok_rows[:5] + [['0'] * 3] + ok_rows[:4]),
  'wide': seq([['0'] * 100000] * 2),
  'one_frame': seq(ok_rows[:1]),
  'zero_frames': seq([]),
  'deep_list': head.format(rate=100, n=1, parts=6) + '      - ' + '[' * 100000 + ']' * 100000 + '\n',
  'deep_map': head.format(rate=100, n=1, parts=6) + '      - ' + '{a: ' * 50000 + '1' + '}' * 50000 + '\n',
  'anchors_bomb': 'a: &a [x,x,x,x,x,x,x,x,x]\n' + ''.join(f'{chr(98+i)}: &{chr(98+i)} [*{chr(97+i)},*{chr(97+i)},*{chr(97+i)},*{chr(97+i)},*{chr(97+i)},*{chr(97+i)},*{chr(97+i)},*{chr(97+i)},*{chr(97+i)}]\n' for i in range(9)) + base,
  'unicode_keys': base.replace('frameRate', 'frameRаte'),
  'rtl_partlabel': base.replace('    numParts: 6\n', '    numParts: 6\n    partLabels: [ "base_yaw\u202e", shoulder_pitch, elbow_pitch, wrist_pitch, wrist_roll, gripper_slide ]\n'),
  'dup_key': base.replace('frameRate: 100', 'frameRate: 100\nframeRate: 1'),
  'tabs': base.replace('  - type', '\t- type'),
  'long_line': base + '# ' + 'x' * 10_000_000 + '\n',
  'many_frames': seq([['0'] * 5 + ['0.01']] * 2_000_000),
  'empty': '',
  'only_comment': '# nothing\n',
  'binary': ''.join(chr(i) for i in range(1, 256)) * 100,
  'yaml_tags': base.replace('frameRate: 100', 'frameRate: !!float 100'),
  'yaml_merge': 'x: &x {frameRate: 100}\n' + base.replace('frameRate: 100', '<<: *x'),
  'version_1': base.replace('formatVersion: 2', 'formatVersion: 1'),
  'version_huge': base.replace('formatVersion: 2', 'formatVersion: 1e300'),
  'type_other': base.replace('type: CompositeSeq', 'type: Vector3Seq'),
}
flag = 0
for name, text in cases.items():
    p = os.path.join(out, name + '.seq')
    with open(p, 'w', encoding='utf-8', newline='') as f: f.write(text)
    try:
        r = subprocess.run(['/usr/bin/time', '-f', '%M', MOTIOND, 'check', p, '--config', 'config/motiond.yaml'],
                           capture_output=True, text=True, timeout=10)
        kb = int(r.stderr.strip().split('\n')[-1]); err = '\n'.join(r.stderr.strip().split('\n')[:-1])
        rc = r.returncode
    except subprocess.TimeoutExpired:
        print(f'HANG {name}'); flag += 1; continue
    what = []
    if 'panicked' in err or rc < 0 or rc > 2: what.append(f'rc {rc}')
    if kb > 1_000_000: what.append(f'{kb // 1024} MB')
    if rc == 2 and not re.search(re.escape(p) + r':\d+:\d+', err): what.append('no FILE:LINE:COL')
    line = (r.stdout.strip().split('\n')[-1] if rc == 0 else err.split('\n')[0])[:300]
    print(f"{'FLAG ' + ','.join(what) if what else 'ok  '} {name:14} rc {rc} {kb // 1024} MB: {line}")
    flag += bool(what)
print('flagged', flag, 'of', len(cases))
