#!/usr/bin/env python3
"""Streams a policy's action chunks to motiond over its control socket.

A stand-in policy emits CHUNK rows of joint targets at RATE rows a second (a slow swing of the
named joints around where they are); each chunk goes out as one `stream_chunk` when its first row
is due, with `t0` its time on the stream's clock. The daemon splices each chunk into the running
path a few ticks ahead, proved within the limits; after the last chunk the robot brakes to rest.

    python3 examples/stream_client.py --socket /run/motiond/control.sock \
        --joints base_yaw,shoulder_pitch --rate 30 --chunk 10 --seconds 5

Only the Python standard library is used. Replace `policy()` with your model's inference.
"""

import argparse
import json
import math
import socket
import sys
import time


class Client:
    """One connection: a JSON request per line out, its reply line in."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.lines = self.sock.makefile("r", encoding="utf-8")

    def request(self, **fields):
        self.sock.sendall((json.dumps(fields) + "\n").encode())
        return json.loads(self.lines.readline())


def policy(start, t, rows, dt):
    """`rows` targets from time `t`: each joint swings ±0.2 rad around its start at 0.25 Hz."""
    return [
        [p + 0.2 * math.sin(2 * math.pi * 0.25 * (t + i * dt)) for p in start]
        for i in range(rows)
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--socket", default="/run/motiond/control.sock")
    ap.add_argument("--joints", required=True, help="comma-separated DOF names")
    ap.add_argument("--rate", type=float, default=30.0, help="rows per second")
    ap.add_argument("--chunk", type=int, default=10, help="rows per chunk")
    ap.add_argument("--horizon", type=float, default=0.1, help="buffering horizon, s")
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    joints = args.joints.split(",")

    client = Client(args.socket)
    status = client.request(cmd="status")
    if not status["ok"]:
        sys.exit(f"status: {status['error']['message']}")
    start = [status["commanded"][j] for j in joints]
    opened = client.request(
        cmd="stream_open", joints=joints, rate_hz=args.rate, horizon_s=args.horizon
    )
    if not opened["ok"]:
        sys.exit(f"stream_open: {opened['error']['message']}")

    dt = 1.0 / args.rate
    period = args.chunk * dt
    began = time.monotonic()
    counts = {}
    for seq in range(int(args.seconds / period)):
        t0 = seq * period
        time.sleep(max(0.0, began + t0 - time.monotonic()))
        rows = policy(start, t0, args.chunk, dt)
        reply = client.request(cmd="stream_chunk", seq=seq, t0=t0, positions=rows)
        outcome = "accepted" if reply["ok"] else reply["error"]["code"]
        counts[outcome] = counts.get(outcome, 0) + 1
        if not reply["ok"]:
            print(f"chunk {seq}: {reply['error']['message']}", file=sys.stderr)
            if outcome not in ("late", "stale", "invalid_motion"):
                break
    closed = client.request(cmd="stream_close")
    print(json.dumps({"chunks": counts, "stream": closed}))


if __name__ == "__main__":
    main()
