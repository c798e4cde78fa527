"""16-byte corruptions spread over a LeRobot data file (written by tests/lerobot/write_dataset.py:
snappy, dictionary encoding, no page checksums, as LeRobot writes): 72 offsets, each XOR 0x5a and
random bytes; imports episodes 0 and 1 (`action`, `observation.state`) and counts the imports that
succeed with a .seq different from the intact file's (silent), the refused ones (caught) and the
ones whose .seq is unchanged (damage outside what the import reads).

    python3 tests/outside/lerobot_pages.py [MOTIOND]   # default target/debug/motiond; needs pyarrow
"""
import os, pathlib, subprocess, sys, shutil, struct, random
ROOT = pathlib.Path(__file__).resolve().parents[2]
M = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / 'target/debug/motiond')
W = str(ROOT / 'tests/lerobot/write_dataset.py'); CFG = str(ROOT / 'config/examples/so101.yaml')
D = str(ROOT / 'target/outside/lerobot/pages')
shutil.rmtree(D, ignore_errors=True)
subprocess.run(['python3', W, D, '{}'], check=True)
f=f'{D}/data/chunk-000/file-000.parquet'
orig=open(f,'rb').read()
flen=struct.unpack('<I', orig[-8:-4])[0]
data_end=len(orig)-8-flen
def imp(ep, col='action'):
    p=subprocess.run([M,'import','lerobot',D,'--episode',str(ep),'--column',col,'--config',CFG],capture_output=True)
    return p.returncode, p.stdout, p.stderr.decode()[:200]
base={(ep,c):imp(ep,c) for ep in (0,1) for c in ('action','observation.state')}
assert all(v[0]==0 for v in base.values()), base
n=72; silent=[]; caught=0; same=0
for mode in ('xor', 'rand'):
    rnd=random.Random(1)
    for k in range(n):
        off=4+k*(data_end-4-16)//(n-1)
        b=bytearray(orig)
        for i in range(16):
            b[off+i] = b[off+i]^0x5a if mode=='xor' else rnd.randrange(256)
        open(f,'wb').write(bytes(b))
        for key,(rc0,out0,_) in base.items():
            rc,out,err=imp(*key)
            if rc!=0: caught+=1
            elif out!=out0: silent.append((mode,off,key))
            else: same+=1
open(f,'wb').write(orig)
print('data bytes', data_end, 'silent', len(silent), 'caught', caught, 'same', same)
for s in silent: print('  silent', s)
