#!/usr/bin/env python3
"""Hostile robot models (URDF, SKEL) through `motiond inspect model` and `motiond check` on the
demo arm: entity bombs, deep nesting, NaN/inf/huge limits, unicode, CRLF, BOM, DOCTYPE, cycles.
Flags panic/abort, hang (10 s), > 1 GB, exit not 0/1/2, a refusal without FILE:LINE:COL, and a
model accepted whose limits are not finite numbers.
usage: tests/outside/model_attacks.py OUTDIR (from the worktree; MOTIOND=binary)"""
import json, os, re, subprocess, sys
MOTIOND = os.environ.get('MOTIOND', 'target/release/motiond')
out = sys.argv[1] if len(sys.argv) > 1 else '/tmp/model_attacks'
os.makedirs(out, exist_ok=True)
urdf = open('config/demo-arm.urdf').read()
skel = open('config/demo-arm.skel').read()
lim = re.search(r'<limit [^>]*/>', urdf).group(0)
def ul(**kw):
    s = lim
    for k, v in kw.items(): s = re.sub(k + r'="[^"]*"', f'{k}="{v}"', s)
    return urdf.replace(lim, s, 1)
bomb = '<?xml version="1.0"?>\n<!DOCTYPE r [<!ENTITY a "aaaaaaaaaa">' + ''.join(f'<!ENTITY {chr(98+i)} "' + f'&{chr(97+i)};' * 10 + '">' for i in range(8)) + ']>\n'
cases = {
  'urdf_bom': ('urdf', '\ufeff' + urdf), 'urdf_crlf': ('urdf', urdf.replace('\n', '\r\n')),
  'urdf_vel_nan': ('urdf', ul(velocity='nan')), 'urdf_vel_inf': ('urdf', ul(velocity='inf')),
  'urdf_vel_neg': ('urdf', ul(velocity='-1')), 'urdf_vel_0': ('urdf', ul(velocity='0')),
  'urdf_vel_huge': ('urdf', ul(velocity='1e308')), 'urdf_lower_nan': ('urdf', ul(lower='NaN')),
  'urdf_lower_gt_upper': ('urdf', ul(lower='2', upper='1')), 'urdf_lower_inf': ('urdf', ul(lower='-inf')),
  'urdf_effort_nan': ('urdf', ul(effort='nan')), 'urdf_hex': ('urdf', ul(velocity='0x10')),
  'urdf_unicode_digit': ('urdf', ul(velocity='１')), 'urdf_space': ('urdf', ul(velocity=' 1 ')),
  'urdf_entity_bomb': ('urdf', bomb + urdf.split('?>', 1)[1].replace('name="', 'name="&i;', 1)),
  'urdf_external_entity': ('urdf', '<?xml version="1.0"?>\n<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n' + urdf.split('?>', 1)[1].replace('name="', 'name="&x;', 1)),
  'urdf_deep': ('urdf', urdf.replace('</robot>', '<a>' * 100000 + '</a>' * 100000 + '</robot>')),
  'urdf_cycle': ('urdf', urdf.replace('</robot>', '<joint name="cyc" type="fixed"><parent link="' + re.findall(r'<child link="([^"]+)"', urdf)[-1] + '"/><child link="' + re.findall(r'<link name="([^"]+)"', urdf)[0] + '"/></joint></robot>')),
  'urdf_self_parent': ('urdf', urdf.replace('</robot>', '<link name="z"/><joint name="self" type="fixed"><parent link="z"/><child link="z"/></joint></robot>')),
  'urdf_dup_joint': ('urdf', urdf.replace('</robot>', re.search(r'<joint .*?</joint>', urdf, re.S).group(0) + '</robot>')),
  'urdf_rtl_name': ('urdf', urdf.replace('name="base_yaw"', 'name="base_yaw\u202e"')),
  'urdf_mimic_self': ('urdf', urdf.replace(lim, lim + '<mimic joint="base_yaw" multiplier="1"/>', 1)),
  'urdf_mimic_nan': ('urdf', urdf.replace(lim, lim + '<mimic joint="shoulder_pitch" multiplier="nan"/>', 1)),
  'urdf_mimic_huge': ('urdf', urdf.replace(lim, lim + '<mimic joint="shoulder_pitch" multiplier="1e300"/>', 1)),
  'urdf_empty': ('urdf', ''), 'urdf_binary': ('urdf', '\x00\x01\x02' * 100),
  'urdf_huge_attr': ('urdf', urdf.replace('name="', 'name="' + 'x' * 5_000_000, 1)),
  'skel_bom': ('skel', '\ufeff' + skel), 'skel_crlf': ('skel', skel.replace('\n', '\r\n')),
  'skel_vel_nan': ('skel', skel.replace('<velocity lower="-2.0" upper="2.0"/>', '<velocity lower="-2.0" upper="nan"/>', 1)),
  'skel_vel_inf': ('skel', skel.replace('<velocity lower="-2.0" upper="2.0"/>', '<velocity lower="-inf" upper="inf"/>', 1)),
  'skel_vel_huge': ('skel', skel.replace('<velocity lower="-2.0" upper="2.0"/>', '<velocity lower="-1e400" upper="1e400"/>', 1)),
  'skel_pos_swapped': ('skel', skel.replace('<position lower="-2.8" upper="2.8"/>', '<position lower="2.8" upper="-2.8"/>', 1)),
  'skel_acc_zero': ('skel', skel.replace('<acceleration lower="-8" upper="8"/>', '<acceleration lower="0" upper="0"/>', 1)),
  'skel_vel_positive_lower': ('skel', skel.replace('<velocity lower="-2.0" upper="2.0"/>', '<velocity lower="1" upper="2.0"/>', 1)),
  'skel_xyz_nan': ('skel', skel.replace('<xyz>0 0 1</xyz>', '<xyz>nan 0 1</xyz>', 1)),
  'skel_xyz_zero': ('skel', skel.replace('<xyz>0 0 1</xyz>', '<xyz>0 0 0</xyz>', 1)),
  'skel_transform_huge': ('skel', skel.replace('<transformation>0 0 0 0 0 0</transformation>', '<transformation>1e308 0 0 0 0 1e308</transformation>', 1)),
  'skel_deep': ('skel', skel.replace('</skeleton>', '<x>' * 100000 + '</x>' * 100000 + '</skeleton>', 1)),
}
flag = 0
cfg = open('config/motiond.yaml').read()
for name, (ext, text) in cases.items():
    p = os.path.join(out, name + '.' + ext)
    with open(p, 'w', encoding='utf-8', newline='') as f: f.write(text)
    c = os.path.join(out, name + '.yaml')
    open(c, 'w').write(cfg.replace('model: demo-arm.skel', f'model: {p}').replace('library: motions', f'library: {os.path.abspath("config/motions")}'))
    what = []; line = ''
    for args in (['inspect', 'model', p, '--json'], ['check', 'config/motions/wave.seq', '--config', c]):
        try:
            r = subprocess.run(['/usr/bin/time', '-f', '%M', MOTIOND] + args, capture_output=True, text=True, timeout=10)
            kb = int(r.stderr.strip().split('\n')[-1]); err = '\n'.join(r.stderr.strip().split('\n')[:-1]); rc = r.returncode
        except subprocess.TimeoutExpired:
            what.append('HANG ' + args[0]); continue
        if 'panicked' in err or rc < 0 or rc > 2: what.append(f'{args[0]} rc {rc}')
        if kb > 1_000_000: what.append(f'{args[0]} {kb // 1024} MB')
        if rc == 2 and not re.search(r'\.(urdf|skel|yaml):\d+:\d+', err): what.append(args[0] + ' no FILE:LINE:COL')
        if args[0] == 'inspect' and rc == 0:
            m = json.loads(r.stdout)
            for sk in m['skeletons']:
                for d in sk['dofs']:
                    vals = list(d['position']) + list(d['velocity']) + list(d['acceleration'])
                    if any(isinstance(v, float) and v != v for v in vals): what.append(f'accepted non-number limit on {d["name"]}')
        line += f' [{args[0]} rc {rc}: ' + (err.split('\n')[0] if rc else r.stdout.strip().split('\n')[-1])[:160] + ']'
    print(f"{'FLAG ' + ','.join(what) if what else 'ok  '} {name:22}{line}")
    flag += bool(what)
print('flagged', flag, 'of', len(cases))
