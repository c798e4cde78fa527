#!/usr/bin/env python3
"""The braking reference for `cargo bench --bench stream`: each joint's time-optimal stop from the
state at a starved stream's last row, as Ruckig computes it (the `ruckig` package, pantor's C++
implementation: velocity interface to rest, no synchronisation between joints, no jerk limit —
the demo arm's model gives none, so both are acceleration-limited).

Input (a JSON file, written by the benchmark): joints, each {position, velocity, acceleration,
max_velocity, max_acceleration, min_acceleration}.
Output (JSON): per joint {duration_s, distance}: the continuous-time optimum (motiond's stop ends
on a control tick, so it may take up to one period longer).
"""

import json
import math
import sys

from ruckig import ControlInterface, InputParameter, Result, Ruckig, Synchronization, Trajectory


def main():
    joints = json.load(open(sys.argv[1]))["joints"]
    out = []
    for j in joints:
        inp = InputParameter(1)
        inp.control_interface = ControlInterface.Velocity
        inp.synchronization = Synchronization.No
        inp.current_position = [j["position"]]
        inp.current_velocity = [j["velocity"]]
        inp.current_acceleration = [j["acceleration"]]
        inp.target_velocity = [0.0]
        inp.target_acceleration = [0.0]
        inp.max_velocity = [j["max_velocity"]]
        inp.max_acceleration = [j["max_acceleration"]]
        inp.min_acceleration = [j["min_acceleration"]]
        inp.max_jerk = [math.inf]
        traj = Trajectory(1)
        result = Ruckig(1).calculate(inp, traj)
        if result not in (Result.Working, Result.Finished):
            sys.exit(f"ruckig: {result} for {j}")
        end, _, _ = traj.at_time(traj.duration)
        out.append({"duration_s": traj.duration, "distance": end[0] - j["position"]})
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
