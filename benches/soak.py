#!/usr/bin/env python3
"""Soak test of `motiond serve` on the simulated demo arm.

N cycles of play / stop (and every few cycles a `reload` request or a SIGHUP), while client
threads flood the socket (requests, garbage, blank lines, duplicate keys, half-written lines,
idle connections) and another thread keeps changing the library (files rewritten in place,
replaced by rename, cut short, zero-filled, added and removed). Prints the daemon's resident
memory, open file descriptors and threads at the start and at the end, and then the time a new
connection takes to get `stop` answered while 300 idle connections hold every slot.

    cargo build --release && python3 benches/soak.py [--cycles 600] [--clients 8]

Only the Python standard library; Linux (/proc). Exit 1 if the daemon died or a cycle failed.
"""

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOINTS = "base_yaw, shoulder_pitch, elbow_pitch, wrist_pitch, wrist_roll, gripper_slide"


def bump_seq(duration_s, amplitude, rate=100):
    """A demo-arm motion out and back along a smooth bump (as tests/daemon_harness)."""
    import math

    frames = int(duration_s * rate) + 1
    rows = []
    for i in range(frames):
        x = amplitude * (1 - math.cos(2 * math.pi * i / (frames - 1))) / 2
        rows.append(f"      - [{x}, {0.5 * x}, {-x}, {x}, {x}, 0.01]\n")
    head = (
        "type: CompositeSeq\ncontent: BodyMotion\nformatVersion: 2\n"
        f"frameRate: {rate}\nnumFrames: {frames}\ncomponents:\n"
        "  - type: MultiValueSeq\n    content: JointDisplacement\n    numParts: 6\n    frames:\n"
    )
    return head + "".join(rows)


class Client:
    def __init__(self, path, timeout=60.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""

    def send(self, data):
        self.sock.sendall(data)

    def reply(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the daemon closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def request(self, obj):
        self.send(json.dumps(obj).encode() + b"\n")
        return self.reply()

    def close(self):
        self.sock.close()


def proc_figures(pid):
    status = open(f"/proc/{pid}/status").read()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    rss_kib = int(fields["VmRSS"].split()[0])
    threads = int(fields["Threads"])
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return {"rss_mib": round(rss_kib / 1024, 1), "fds": fds, "threads": threads}


def wait_for(what, check, timeout=60.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"never {what}")
        time.sleep(0.005)


def flood(path, stop, counts, seed):
    rng = random.Random(seed)
    lines = [
        b'{"cmd":"status"}\n',
        b'{"cmd":"list"}\n',
        b"garbage\n",
        b"\n",
        b'{"cmd":"play","motion":"wave","speed":1,"speed":2}\n',
        b'{"cmd":"fly"}\n',
        b'{"cmd":"play","motion":"../../etc/passwd"}\n',
    ]
    while not stop.is_set():
        try:
            c = Client(path, timeout=30)
            kind = rng.random()
            if kind < 0.15:
                # Half a request, then gone.
                c.send(b'{"cmd":"sta')
                c.close()
            elif kind < 0.25:
                # Idle for a while, holding a slot.
                time.sleep(rng.uniform(0.05, 0.5))
                c.close()
            else:
                for _ in range(rng.randint(1, 20)):
                    c.send(rng.choice(lines))
                    c.reply()
                    counts["answered"] += 1
                c.close()
        except (OSError, ConnectionError, ValueError):
            counts["errors"] += 1


def churn(library, stop, counts, seed):
    rng = random.Random(seed)
    good = bump_seq(0.4, 0.05)
    while not stop.is_set():
        name = os.path.join(library, f"churn{rng.randint(0, 3)}.seq")
        action = rng.random()
        try:
            if action < 0.3:
                with open(name, "w") as f:  # rewritten in place
                    f.write(good)
            elif action < 0.5:
                tmp = name + ".tmp"
                with open(tmp, "w") as f:
                    f.write(good)
                os.rename(tmp, name)
            elif action < 0.65:
                with open(name, "w") as f:  # cut short at a line boundary
                    f.write(good[: good.index("\n", len(good) // 2) + 1])
            elif action < 0.8:
                with open(name, "wb") as f:  # zero-filled tail, as after a power loss
                    f.write(good[: len(good) // 2].encode() + b"\0" * 4096)
            elif os.path.exists(name):
                os.remove(name)
            counts["changes"] += 1
        except OSError:
            pass
        time.sleep(rng.uniform(0.005, 0.05))


def stop_latency(path, idle_count, samples):
    """Seconds from connecting to the `stop` reply, while `idle_count` connections sit idle."""
    idle = []
    for i in range(idle_count):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        if i % 2:
            s.sendall(b'{"cmd":"pl')
        idle.append(s)
    times = []
    replies = set()
    for _ in range(samples):
        t0 = time.perf_counter()
        c = Client(path, timeout=30)
        reply = c.request({"cmd": "stop"})
        times.append(time.perf_counter() - t0)
        replies.add(json.dumps(reply, sort_keys=True))
        c.close()
        time.sleep(0.01)
    for s in idle:
        s.close()
    return times, replies


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=600)
    ap.add_argument("--clients", type=int, default=8, help="flooding client threads")
    ap.add_argument("--idle", type=int, default=300, help="idle connections for the stop latency")
    ap.add_argument("--motiond", default=None, help="default: target/release/motiond")
    args = ap.parse_args()
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    motiond = args.motiond or os.path.join(target, "release", "motiond")
    if not os.path.exists(motiond):
        sys.exit(f"{motiond} not found: cargo build --release first")

    work = tempfile.mkdtemp(prefix="motiond-soak-")
    library = os.path.join(work, "motions")
    os.mkdir(library)
    shutil.copy(os.path.join(REPO, "config/motions/wave.seq"), library)
    with open(os.path.join(library, "short.seq"), "w") as f:
        f.write(bump_seq(0.6, 0.05))
    sock = os.path.join(work, "control.sock")
    config = os.path.join(work, "motiond.yaml")
    with open(config, "w") as f:
        f.write(
            f"robot:\n  model: {REPO}/config/demo-arm.skel\n  joints: [{JOINTS}]\n"
            f"motion:\n  library: {library}\n"
            "control:\n  rate_hz: 1000\n"
            "rt:\n  lock_memory: false\n  max_late_ms: 1000\n"
            "backend: sim\n"
            f"daemon:\n  socket: {sock}\n  watchdog: false\n"
        )
    log = open(os.path.join(work, "motiond.log"), "w")
    daemon = subprocess.Popen([motiond, "serve", "--config", config], stderr=log, stdin=subprocess.DEVNULL)
    failures = 0
    try:
        wait_for("a socket", lambda: os.path.exists(sock) and daemon.poll() is None)
        main_client = Client(sock)
        wait_for("the library", lambda: main_client.request({"cmd": "list"}).get("loading") == 0)
        start = proc_figures(daemon.pid)
        print(f"start: {json.dumps(start)}")

        stop = threading.Event()
        counts = {"answered": 0, "errors": 0, "changes": 0}
        threads = [threading.Thread(target=flood, args=(sock, stop, counts, i)) for i in range(args.clients)]
        threads.append(threading.Thread(target=churn, args=(library, stop, counts, 99)))
        for t in threads:
            t.start()
        t0 = time.monotonic()
        reloads = hups = 0
        for cycle in range(args.cycles):
            motion = "short" if cycle % 2 else "wave"
            reply = main_client.request({"cmd": "play", "motion": motion})
            if not reply.get("ok"):
                failures += 1
                print(f"cycle {cycle}: play {motion}: {reply}", file=sys.stderr)
            time.sleep(random.uniform(0.0, 0.05))
            reply = main_client.request({"cmd": "stop"})
            if not reply.get("ok"):
                failures += 1
                print(f"cycle {cycle}: stop: {reply}", file=sys.stderr)
            wait_for("at rest", lambda: main_client.request({"cmd": "status"})["state"] in ("idle", "holding"))
            if cycle % 10 == 5:
                reply = main_client.request({"cmd": "reload"})
                reloads += 1
                if not reply.get("ok"):
                    failures += 1
                    print(f"cycle {cycle}: reload: {reply}", file=sys.stderr)
            if cycle % 25 == 20:
                os.kill(daemon.pid, signal.SIGHUP)
                hups += 1
            if daemon.poll() is not None:
                raise RuntimeError(f"motiond exited with {daemon.returncode}")
        elapsed = time.monotonic() - t0
        stop.set()
        for t in threads:
            t.join()
        # Let the last reload and the closed connections settle before reading the figures; the
        # blocking pool that runs requests keeps an idle thread for 10 s (tokio's default).
        time.sleep(11.0)
        wait_for("the library", lambda: main_client.request({"cmd": "list"}).get("loading") == 0)
        end = proc_figures(daemon.pid)
        print(
            f"cycles: {args.cycles} play/stop in {elapsed:.1f} s, {reloads} reload requests, "
            f"{hups} SIGHUPs, {counts['answered']} flood requests answered "
            f"({counts['errors']} flood connections refused or cut), {counts['changes']} file changes, "
            f"{failures} failed cycles"
        )
        print(f"end:   {json.dumps(end)}")

        times, replies = stop_latency(sock, args.idle, 50)
        ms = sorted(t * 1000 for t in times)
        print(
            f"stop with {args.idle} idle connections: {len(times)} samples, median "
            f"{statistics.median(ms):.2f} ms, p90 {ms[int(0.9 * len(ms)) - 1]:.2f} ms, max {ms[-1]:.2f} ms; "
            f"replies {sorted(replies)}"
        )
        if any('"ok": true' not in r for r in replies):
            failures += 1
        main_client.close()
    finally:
        if daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=30)
        log.close()
        if failures == 0 and daemon.returncode == 0:
            shutil.rmtree(work)
        else:
            print(f"kept {work} (motiond.log)", file=sys.stderr)
    sys.exit(1 if failures or daemon.returncode != 0 else 0)


if __name__ == "__main__":
    main()
