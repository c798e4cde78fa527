"""LeRobot's position normalisation, reproduced from its formulas (lerobot 0.6.2,
`src/lerobot/motors/motors_bus.py`, `MotorsBus._normalize`) for motiond's calibration tests.

    python3 calibration_reference.py < cases.json

Each case: {"motor": {id, drive_mode, homing_offset, range_min, range_max}, "mode": "degrees" |
"range_0_100" | "range_m100_100", "resolution": 4096, "apply_drive_mode": bool, "raw": [...]}.
Prints, per case, the normalised values as repr strings (shortest round trip).

The formulas, as LeRobot states them:
- degrees: mid = (range_min + range_max) / 2; (raw - mid) * 360 / (resolution - 1); no clamping,
  drive_mode not applied;
- range_0_100: bounded = min(range_max, max(range_min, raw));
  (bounded - range_min) / (range_max - range_min) * 100, then 100 - x when the bus applies drive
  modes and drive_mode is set;
- range_m100_100: the same fraction * 200 - 100, negated under drive_mode.
"""

import json
import sys


def normalise(motor, mode, resolution, apply_drive_mode, raw):
    lo, hi = motor["range_min"], motor["range_max"]
    flip = bool(apply_drive_mode and motor["drive_mode"])
    bounded = min(hi, max(lo, raw))
    if mode == "degrees":
        mid = (lo + hi) / 2
        return (raw - mid) * 360 / (resolution - 1)
    if mode == "range_0_100":
        norm = ((bounded - lo) / (hi - lo)) * 100
        return 100 - norm if flip else norm
    if mode == "range_m100_100":
        norm = (((bounded - lo) / (hi - lo)) * 200) - 100
        return -norm if flip else norm
    raise ValueError(mode)


cases = json.load(sys.stdin)
print(json.dumps([
    [repr(float(normalise(c["motor"], c["mode"], c["resolution"], c["apply_drive_mode"], r)))
     for r in c["raw"]]
    for c in cases]))
