"""LeRobot datasets written with pyarrow and broken the ways an outside tester tried, each imported
with the release motiond; prints exit code, time and the first stderr line per case.

    python3 tests/outside/lerobot_attacks.py [CASE...]   # cases: baseline v21 fps empty_episode huge range truncated dtypes values meta fs
"""
import json, os, subprocess, sys, shutil, time, struct
import pathlib
ROOT = pathlib.Path(__file__).resolve().parents[2]
W = str(ROOT / 'tests/lerobot/write_dataset.py')
M = str(ROOT / 'target/release/motiond')
CFG = str(ROOT / 'config/examples/so101.yaml')
R = str(ROOT / 'target/outside/lerobot')
os.makedirs(R, exist_ok=True)
import pyarrow as pa, pyarrow.parquet as pq
def write(name, spec):
    d = f'{R}/{name}'; shutil.rmtree(d, ignore_errors=True)
    subprocess.run(['python3', W, d, json.dumps(spec)], check=True, capture_output=True)
    return d
def imp(name, d, ep=0, extra=()):
    t = time.time()
    p = subprocess.run([M, 'import', 'lerobot', d, '--episode', str(ep), '--config', CFG, '-o', f'{d}.seq', *extra], capture_output=True, text=True, timeout=300)
    el = time.time() - t
    err = p.stderr.strip().splitlines()
    print(f'{name}: rc={p.returncode} {el:.1f}s :: {err[0][:300] if err else ""}' + (f' [+{len(err)-1} lines]' if len(err) > 1 else ''))
    return p
def info_edit(d, f):
    p = f'{d}/meta/info.json'; i = json.load(open(p)); f(i); json.dump(i, open(p, 'w'))
def data_file(d): return f'{d}/data/chunk-000/file-000.parquet'
cases = sys.argv[1:]
def case(n): return not cases or n in cases
if case('baseline'): imp('baseline', write('baseline', {}))
if case('v21'): imp('v21', write('v21', {'version': 'v2.1'}))
for fps in [0, -30, 1e-9, 1e9, 1e308, 'thirty', None, 30.5, True]:
    n = f'fps_{fps}'
    if case('fps'):
        d = write(n, {'episodes': [20]})
        info_edit(d, lambda i: i.__setitem__('fps', fps))
        imp(n, d)
if case('empty_episode'):
    imp('empty_episode', write('empty_episode', {'episodes': [0, 10]}), 0)
    imp('one_frame_episode', write('one_frame_episode', {'episodes': [1, 10]}), 0)
if case('huge'):
    imp('huge_episode_200k', write('huge', {'episodes': [200000], 'fps': 1000}), 0)
if case('range'):
    d = write('range', {})
    for ep in [-1, 3, 18446744073709551615, 99999999999999999999]:
        imp(f'episode_{ep}', d, ep)
if case('truncated'):
    d = write('truncated', {})
    f = data_file(d); b = open(f, 'rb').read()
    for cut in [0, 4, 8, 100, len(b)//2, len(b)-1, len(b)-9]:
        open(f, 'wb').write(b[:cut]); imp(f'truncated_{cut}of{len(b)}', d, 0)
    open(f, 'wb').write(b[:len(b)-12] + b'\xff\xff\xff\x7f' + b[-8:]); imp('footer_len_huge', d, 0)
    bb = bytearray(b); 
    for k in range(len(bb)//3, len(bb)//3+200): bb[k] ^= 0x5a
    open(f, 'wb').write(bytes(bb)); imp('garbled_middle', d, 0)
    em = f'{d}/meta/episodes/chunk-000/file-000.parquet'; eb = open(em,'rb').read()
    open(f, 'wb').write(b); open(em, 'wb').write(eb[:len(eb)//2]); imp('truncated_episodes_meta', d, 0)
def retype(name, col, arr_fn, typ):
    d = write(name, {'episodes': [20]})
    f = data_file(d); t = pq.read_table(f)
    i = t.schema.get_field_index(col)
    t = t.set_column(i, pa.field(col, typ), arr_fn(t.column(col).to_pylist(), typ))
    pq.write_table(t, f)
    return d
if case('dtypes'):
    imp('action_int64', retype('action_int64', 'action', lambda v, ty: pa.array([[int(x) for x in r] for r in v], ty), pa.list_(pa.int64(), 6)))
    imp('action_varlist', retype('action_varlist', 'action', lambda v, ty: pa.array(v, ty), pa.list_(pa.float32())))
    imp('action_varlist_short', retype('action_varlist_short', 'action', lambda v, ty: pa.array([r[:3] for r in v], ty), pa.list_(pa.float32())))
    imp('action_string', retype('action_string', 'action', lambda v, ty: pa.array([json.dumps(r) for r in v], ty), pa.string()))
    imp('action_f16', retype('action_f16', 'action', lambda v, ty: pa.array(v, ty), pa.list_(pa.float16(), 6)))
    imp('action_scalar', retype('action_scalar', 'action', lambda v, ty: pa.array([r[0] for r in v], ty), pa.float32()))
    imp('timestamp_int', retype('timestamp_int', 'timestamp', lambda v, ty: pa.array([int(x*1000) for x in v], ty), pa.int64()))
    imp('timestamp_string', retype('timestamp_string', 'timestamp', lambda v, ty: pa.array([str(x) for x in v], ty), pa.string()))
    imp('episode_index_f64', retype('episode_index_f64', 'episode_index', lambda v, ty: pa.array([float(x) for x in v], ty), pa.float64()))
    imp('frame_index_i32', retype('frame_index_i32', 'frame_index', lambda v, ty: pa.array(v, ty), pa.int32()))
    imp('action_nested', retype('action_nested', 'action', lambda v, ty: pa.array([[[x] for x in r] for r in v], ty), pa.list_(pa.list_(pa.float32()), 6)))
if case('values'):
    for val in ['inf', '-inf', 1e30, -1e30, 3.4e38, 1e-45]:
        d = write(f'val_{val}', {'episodes': [10], 'faults': [{'kind': 'value', 'episode': 0, 'frame': 3, 'column': 'action', 'element': 1, 'value': val}]})
        imp(f'value_{val}', d)
    for tv in ['inf', -1.0, 1e30, 0.0]:
        d = write(f'time_{tv}', {'episodes': [10], 'faults': [{'kind': 'time', 'episode': 0, 'frame': 3, 'value': tv}]})
        imp(f'time_{tv}', d)
    d = write('time_all_same', {'episodes': [5], 'faults': [{'kind': 'time', 'episode': 0, 'frame': k, 'value': 0.0} for k in range(5)]}); imp('time_all_zero', d)
    d = write('time_spread', {'episodes': [3], 'faults': [{'kind': 'time', 'episode': 0, 'frame': 2, 'value': 1e7}]}); imp('time_gap_1e7s', d)
if case('meta'):
    for key, val in [('dataset_from_index', -5), ('dataset_to_index', 10**15), ('dataset_from_index', 30), ('data/file_index', 10**9), ('data/chunk_index', -1), ('length', -3)]:
        d = write(f'meta_{key.replace("/","_")}_{val}', {'episode_faults': [{'row': 0, 'key': key, 'value': val}]})
        imp(f'meta_{key}={val}', d)
    for dp in ['../../../../etc/passwd', '/etc/passwd', 'data/chunk-{chunk_index:0999999999d}/file-{file_index:03d}.parquet', 'data/{nope}.parquet', 'data/chunk-{chunk_index:03d/x', '{chunk_index}{chunk_index}{file_index}', '', 'data/chunk-000']:
        d = write('dp', {})
        info_edit(d, lambda i: i.__setitem__('data_path', dp))
        imp(f'data_path={dp[:40]!r}', d)
    for v in ['v1.6', 'v3.0.0', 3.0, None]:
        d = write('ver', {}); info_edit(d, lambda i: i.__setitem__('codebase_version', v)); imp(f'version={v}', d)
    d = write('info_trunc', {}); s = open(f'{d}/meta/info.json').read(); open(f'{d}/meta/info.json','w').write(s[:len(s)//2]); imp('info_truncated', d)
    d = write('info_deep', {}); open(f'{d}/meta/info.json','w').write('['*100000 + ']'*100000); imp('info_deep_nesting', d)
    d = write('info_bin', {}); open(f'{d}/meta/info.json','wb').write(b'\xff\xfe\x00garbage'); imp('info_binary', d)
    d = write('info_dir', {}); os.remove(f'{d}/meta/info.json'); os.mkdir(f'{d}/meta/info.json'); imp('info_is_dir', d)
    d = write('names_huge', {}); info_edit(d, lambda i: i['features']['action'].__setitem__('shape', [10**12])); imp('shape_1e12', d)
    d = write('names_neg', {}); info_edit(d, lambda i: i['features']['action'].__setitem__('shape', [-6])); imp('shape_neg', d)
    d = write('v21_jsonl', {'version': 'v2.1'}); open(f'{d}/meta/episodes.jsonl','a').write('{broken\n'); imp('v21_broken_jsonl', d)
    d = write('v21_len', {'version': 'v2.1'}); open(f'{d}/meta/episodes.jsonl','w').write(json.dumps({'episode_index':0,'length':10**12})+'\n'); imp('v21_length_huge', d)
if case('fs'):
    imp('no_such_dir', R + '/nonexistent')
    imp('file_not_dir', '/etc/hostname')
    d = write('fifo', {}); f = data_file(d); os.remove(f); os.mkfifo(f)
    try: imp('data_file_is_fifo', d)
    except subprocess.TimeoutExpired: print('data_file_is_fifo: HANG (timeout)')
    d = write('devzero', {}); f = data_file(d); os.remove(f); os.symlink('/dev/zero', f)
    try: imp('data_file_is_dev_zero', d)
    except subprocess.TimeoutExpired: print('data_file_is_dev_zero: HANG (timeout)')
    d = write('outdir', {}); p = subprocess.run([M, 'import', 'lerobot', d, '--episode', '0', '--config', CFG, '-o', '/nonexistent/x.seq'], capture_output=True, text=True); print('out_unwritable rc', p.returncode, p.stderr.strip()[:200])
    p = subprocess.run([M, 'import', 'lerobot', d, '--episode', '0', '--config', CFG, '-o', d], capture_output=True, text=True); print('out_is_dir rc', p.returncode, p.stderr.strip()[:200])
    p = subprocess.run([M, 'import', 'lerobot', d, '--episode', '0', '--config', CFG, '--percent', 'nope'], capture_output=True, text=True); print('percent_unknown rc', p.returncode, p.stderr.strip()[:200])
    p = subprocess.run([M, 'import', 'lerobot', d, '--episode', '0', '--config', CFG, '--column', 'index'], capture_output=True, text=True); print('column_index rc', p.returncode, p.stderr.strip()[:200])
