#!/usr/bin/env python3
"""The smoothness reference for `cargo bench --bench stream`: RMS jerk of the same rows as SciPy
interpolates them, over the same window and at the same control rate as motiond's commanded
stream.

Input (a JSON file, written by the benchmark): rate_hz; window [a, b] in stream seconds; chunks,
each {takeover_s, times, values} in arrival order (times already include the horizon); rows, the
accepted rows (newest chunk wins over an older one's overlap) as {times, values}.

Output (JSON): per joint RMS jerk of
- natural: one natural cubic spline (scipy.interpolate.CubicSpline, bc_type="natural") through all
  accepted rows — the offline ideal, every row known in advance;
- upsampling: ros2_controllers' positions_upsampling as built chunk by chunk (PR #2491 and the
  cross-chunk continuity of #2573): at each chunk's takeover a cubic spline from the current state
  through the chunk's rows still ahead, clamped to the current velocity at its start and to rest
  (v = 0) at its end, played until the next chunk takes over.
Jerk is the third finite difference of the positions sampled at rate_hz, times rate_hz³.
"""

import json
import sys

import numpy as np
from scipy.interpolate import CubicSpline


def rms_jerk(p, rate):
    j = np.diff(p, n=3, axis=0) * rate**3
    return np.sqrt(np.mean(j**2, axis=0)).tolist()


def main():
    spec = json.load(open(sys.argv[1]))
    rate = spec["rate_hz"]
    a, b = spec["window"]
    t = np.arange(round(a * rate), round(b * rate) + 1) / rate

    rows = spec["rows"]
    natural = CubicSpline(np.array(rows["times"]), np.array(rows["values"]), bc_type="natural")
    p_natural = natural(t)

    chunks = spec["chunks"]
    n = len(chunks[0]["values"][0])
    grid = np.arange(0, round(b * rate) + 1) / rate
    p_up = np.full((len(grid), n), np.nan)
    pos, vel, current = None, np.zeros(n), None
    for i, c in enumerate(chunks):
        start = c["takeover_s"]
        times = np.array(c["times"])
        values = np.array(c["values"])
        if current is not None:
            pos, vel = current(start), current(start, 1)
        ahead = times > start + 1e-9
        if pos is None:
            # The first chunk: from its first row, at rest.
            x, y, v0 = times, values, np.zeros(n)
            start = times[0]
        else:
            x = np.concatenate([[start], times[ahead]])
            y = np.vstack([pos, values[ahead]])
            v0 = vel
        if len(x) < 2:
            continue
        current = CubicSpline(x, y, bc_type=((1, v0), (1, np.zeros(n))))
        until = chunks[i + 1]["takeover_s"] if i + 1 < len(chunks) else x[-1]
        sel = (grid >= start - 1e-9) & (grid <= until + 1e-9)
        p_up[sel] = current(np.clip(grid[sel], x[0], x[-1]))
    sel = (grid >= a - 1e-9) & (grid <= b + 1e-9)
    p_up = p_up[sel]
    json.dump({"natural": rms_jerk(p_natural, rate), "upsampling": rms_jerk(p_up, rate)}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
