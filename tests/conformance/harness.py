"""What every conformance scenario needs: a serial link (two pseudo-terminals joined by socat),
the test robot and a motion, a configuration, `motiond play` run against a peer, and the
trajectory motiond should stream (from `motiond resample`), in joint units.

The peers are third-party stacks (python-can's slcan, canopen, cantools with ODrive's DBC files,
dynamixel-sdk); this module only wires them to motiond.
"""

import csv
import io
import json
import math
import os
import pathlib
import signal
import socket
import subprocess
import threading
import time

import can
import can.interfaces.slcan
from can.exceptions import error_check

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MOTIOND = os.environ.get("MOTIOND_BIN", str(ROOT / "target" / "debug" / "motiond"))
JOINTS = ("a", "b", "v")
# Frames (packets) each protocol's peers received and decoded with their third-party stack,
# summed over the run for the suite's closing lines.
DECODED = {}


# The drives' watchdogs motiond arms in every scenario (`watchdog_ms`). A drive's watchdog runs
# on wall time, and on the loaded 2-core machine motiond's bus writer and the peers' threads stall
# for hundreds of ms (the loop woke 466 ms late; at 300 ms CiA 402 EMCY 0x8130, ODrive 0x800 and
# Damiao TIMEOUT fired mid-play under load): twice the latest wake-up these runs allow motiond's
# loop (MAX_LATE_MS), so a stall a scenario survives does not trip a drive, and within every
# family's register (DYNAMIXEL's Bus Watchdog: 127 × 20 ms). That motiond keeps the
# watchdog fed shows in every play here running to its end; that it fires when motiond goes
# silent is tested on its own, by event, in each family's kill scenario. A peer's watchdog runs
# out at the time its timer would (the last frame plus the period motiond set), whenever the
# peer's thread comes by to see it, so those scenarios check the period motiond set rather than
# the peer's reaction time.
WATCHDOG_MS = 2000
# The latest wake-up motiond's loop takes without faulting (`rt.max_late_ms`), in every scenario
# but those that set their own: on the loaded 2-core machine the loop has woken 466 ms late, and
# no conformance scenario is about the loop's lateness (tests/rt_*.rs are, on a manual clock).
MAX_LATE_MS = 1000
# How long motiond waits for a drive's report (`feedback_timeout_ms`) in scenarios not about that
# timeout: a peer's Python thread on the loaded machine falls hundreds of ms behind (a DYNAMIXEL
# alert scenario failed on `feedback_missing` of another servo, an MIT rig on one 0.5 s late).
FEEDBACK_MS = 2000
# A motion long enough that a scenario's fault lands while it plays, however late the loaded
# machine lets a peer see the first commands (the fault ends the play: nothing waits it out).
FAULT_MOTION_S = 20


# SCHED_FIFO priority of the peers when permitted (conftest), below motiond's loop (rt.priority 80).
PEER_PRIORITY = 50
PEERS_REAL_TIME = False


def motiond_command(*args: str) -> list:
    """`motiond ARGS` with the scheduling a daemon gets from systemd (SCHED_OTHER; it raises its
    loop itself), not the peers' real-time priority this process passes on to its children."""
    prefix = ["chrt", "--other", "0"] if PEERS_REAL_TIME else []
    return [*prefix, MOTIOND, *args]


# The stop scenarios (test_stops.py): per protocol and measure, the worst share of the limit a
# drive took and the scenario it came from, for the suite's closing lines.
STOP_SHARES = {}


# Every running peer's "frames wait unread on my line" (`settle` waits for none).
BEHIND = []


def watch_behind(behind):
    """Registers a peer's `behind` until `unwatch_behind` (its close)."""
    BEHIND.append(behind)


def unwatch_behind(behind):
    if behind in BEHIND:
        BEHIND.remove(behind)


def count_decoded(protocol: str, n: int):
    DECODED[protocol] = DECODED.get(protocol, 0) + n


def note_stop_shares(protocol: str, scenario: str, shares: dict, raw: dict, allowance: dict):
    """`shares`: less what the protocol's quantisation can add; `raw`: as decoded; `allowance`:
    what quantisation can add (all as shares of the limit)."""
    worst = STOP_SHARES.setdefault(protocol, {})
    for measure, share in shares.items():
        if share > worst.get(measure, (-1.0, 0.0, 0.0, ""))[0]:
            worst[measure] = (share, raw[measure], allowance[measure], scenario)


class Link:
    """Two pseudo-terminals joined by socat: motiond opens `device`, the peer `peer`.

    A spare descriptor keeps motiond's end open, so motiond exiting (or being killed) leaves the
    peer's end silent, like a cut cable, instead of closing it."""

    def __init__(self, folder: pathlib.Path):
        self.device = folder / "motiond-tty"
        self.peer = folder / "peer-tty"
        self.socat = subprocess.Popen(
            [
                "socat",
                f"pty,raw,echo=0,link={self.device}",
                f"pty,raw,echo=0,link={self.peer}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 5
        while not (self.device.exists() and self.peer.exists()):
            if time.monotonic() > deadline:
                raise RuntimeError("socat did not create the pseudo-terminals")
            time.sleep(0.01)
        self.keeper = os.open(self.device, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)

    def close(self):
        os.close(self.keeper)
        self.socat.terminate()
        self.socat.wait(5)


class Slcan(can.interfaces.slcan.slcanBus):
    """python-can's slcan bus, taking what waits on the line in one read. Its own reader takes one
    byte a system call, so a Python peer fell behind motiond's stream at 400 Hz on a loaded
    machine and the pseudo-terminal filled (motiond's queue_full). Lines are decoded by
    python-can as ever."""

    def __init__(self, path, bitrate=1_000_000):
        super().__init__(channel=str(path), bitrate=bitrate, sleep_after_open=0)

    # Once motiond has exited nothing reads its end of the link (Link.keeper holds it open, as a
    # cut cable), so socat's buffer and then this line fill: a write that waits longer than this
    # fails (CanError, which the peers drop) instead of hanging the suite.
    WRITE_TIMEOUT_S = 1.0

    def send(self, msg, timeout=None):
        super().send(msg, self.WRITE_TIMEOUT_S if timeout is None else timeout)

    def shutdown(self):
        try:
            super().shutdown()
        except can.CanError:  # its closing `C` did not fit on a full line: nobody reads it
            self.serialPortOrig.close()

    def _read(self, timeout):
        deadline = None if timeout is None else time.monotonic() + timeout
        with error_check("Could not read from serial device"):
            while True:
                ends = [i for i in (self._buffer.find(self._OK), self._buffer.find(self._ERROR)) if i >= 0]
                if ends:
                    end = min(ends) + 1
                    line = self._buffer[:end].decode()
                    del self._buffer[:end]
                    return line
                # Up to the port's timeout (1 ms) for the first byte, then all that waits.
                chunk = self.serialPortOrig.read(max(1, self.serialPortOrig.in_waiting))
                if chunk:
                    self._buffer.extend(chunk)
                elif deadline is not None and time.monotonic() >= deadline:
                    return None

    def behind(self) -> bool:
        """Frames wait unread (on the line or here): the peer has not caught up with motiond."""
        return (
            self.serialPortOrig.in_waiting > 0
            or self._OK[0] in self._buffer
            or self._ERROR[0] in self._buffer
        )


class CanPeer:
    """What every CAN peer on the far end of an SLCAN link shares: the line (`Slcan`, CAN-FD
    lines too), a thread that hands each frame to `apply` (under `lock`) and sends the frame it
    returns, and a thread that runs the drives' timers (`watchdogs`) every 2 ms — only while
    nothing waits unread, so this peer's own stall on a loaded machine is never taken for
    motiond's silence. Every problem `apply` raises is a conformance failure, kept in `errors`.
    Subclasses set `family` (the closing line's name) and `decoded()` (frames they decoded)."""

    family = "can"

    def __init__(self, link):
        self.link = link
        self.frames = FrameLog()
        self.errors = []
        self.can = Slcan(link.peer)
        self.lock = threading.Lock()  # held while a frame is handled (a test may stall the peer)
        self.running = True
        watch_behind(self.behind)
        self.threads = [
            threading.Thread(target=self.receive, daemon=True),
            threading.Thread(target=self.watch, daemon=True),
        ]
        for t in self.threads:
            t.start()

    def apply(self, msg):
        """Takes one frame in; the frame to answer with, if any."""
        raise NotImplementedError

    def watchdogs(self, now: float):
        """The drives' timers at `now` (under `lock`); none by default."""

    def decoded(self) -> int:
        return 0

    def behind(self) -> bool:
        return self.can.behind()

    def close(self):
        unwatch_behind(self.behind)
        self.running = False
        for t in self.threads:
            t.join(2)
        self.can.shutdown()
        count_decoded(self.family, self.decoded())

    def send(self, msg):
        try:
            self.can.send(msg)
        except can.CanError:
            pass

    def receive(self):
        while self.running:
            msg = self.can.recv(0.01)
            if msg is None:
                continue
            self.frames.add(msg)
            try:
                with self.lock:
                    reply = self.apply(msg)
            except Exception as e:  # noqa: BLE001 - every problem is a conformance failure
                self.errors.append(f"{msg}: {e!r}")
                continue
            if reply is not None:
                self.send(reply)

    def watch(self):
        while self.running:
            time.sleep(0.002)
            with self.lock:
                if not self.behind():
                    self.watchdogs(time.monotonic())


def smooth(t: float, duration: float, amplitude: float) -> float:
    """0 → amplitude → 0 over `duration`, at rest at both ends."""
    t = min(max(t, 0.0), duration)
    return amplitude * (1.0 - math.cos(2.0 * math.pi * t / duration)) / 2.0


AMPLITUDES = {"a": 0.4, "b": -0.3, "v": 0.6}


def write_motion(path: pathlib.Path, duration: float = 1.5, fps: int = 100, joints=JOINTS):
    """A .seq motion of `joints` (default the three), starting and ending at rest at 0."""
    rows = []
    rest = fps // 5  # 0.2 s at rest at both ends, so the spline starts and ends at rest
    for k in range(int(round(duration * fps)) + 1 + 2 * rest):
        t = k / fps - rest / fps
        rows.append(
            "      - [ " + ", ".join(f"{smooth(t, duration, AMPLITUDES[j]):.9f}" for j in joints) + " ]"
        )
    path.write_text(
        "type: CompositeSeq\ncontent: BodyMotion\nformatVersion: 2\n"
        f"frameRate: {fps}\nnumFrames: {len(rows)}\ncomponents:\n"
        f"  - type: MultiValueSeq\n    content: JointDisplacement\n    numParts: {len(joints)}\n"
        "    frames:\n" + "\n".join(rows) + "\n"
    )


def write_config(
    folder: pathlib.Path,
    buses: str,
    rate_hz: float = 250,
    library=None,
    extra: str = "",
    enable_timeout_s: float = 20,
    rt: str = "",
    joints=JOINTS,
    skel: str = "robot.skel",
    max_late_ms: float = MAX_LATE_MS,
) -> pathlib.Path:
    """A configuration of the test robot on `buses` (YAML of the `buses:` list, indented by 2);
    `library`: the daemon's motion folder; `extra`: further top-level sections; `rt`: further
    keys of the rt section (indented by 2); `joints`: the commanded joints and `skel` the model
    they are in (`servos.skel`, the position joints alone, for servos without a velocity mode);
    `max_late_ms`: the latest wake-up the loop takes without faulting."""
    path = folder / "motiond.yaml"
    path.write_text(
        f"robot:\n  skel: {HERE / skel}\n  joints: [{', '.join(joints)}]\n"
        "motion:\n  interpolation: cubic\n"
        + (f"  library: {library}\n" if library else "")
        + f"control:\n  rate_hz: {rate_hz}\n"
        # A shared, busy test machine: late wake-ups are the machine's, not the protocol's; the
        # Python drives' set-up takes what the machine gives them (every scenario still waits
        # for its outcome, however long enabling took).
        f"rt:\n  lock_memory: false\n  max_late_ms: {max_late_ms}\n  enable_timeout_s: {enable_timeout_s}\n"
        + rt
        + "backend: buses\n"
        # The flight recorder's dumps stay with the test.
        + f"recorder:\n  dir: {folder / 'flight'}\n"
        "buses:\n" + buses + extra
    )
    return path


def expected(config: pathlib.Path, motion: pathlib.Path) -> list:
    """The motion as motiond plays it: per tick, the position of each joint (joint units)."""
    out = subprocess.run(
        motiond_command("resample", str(motion), "--config", str(config), "--format", "csv"),
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    return [{j: float(v) for j, v in r.items() if j in JOINTS} for r in rows]


class Play:
    """`motiond play` in the background. Every one still running when its test ends is killed
    (conftest), so a failed scenario leaves nothing behind."""

    running = []

    def __init__(self, config: pathlib.Path, motion: pathlib.Path, *extra: str):
        self.proc = subprocess.Popen(
            motiond_command("play", str(motion), "--config", str(config), *extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.killed_at = None
        Play.running.append(self)

    @classmethod
    def reap(cls):
        for p in cls.running:
            if p.proc.poll() is None:
                p.proc.kill()
            p.proc.communicate()
        cls.running.clear()

    def wait(self, timeout: float = 30) -> int:
        try:
            self.out, self.err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.out, self.err = self.proc.communicate()
            raise
        return self.proc.returncode

    def until(self, predicate, what: str, timeout: float = 60.0):
        """Waits until `predicate()` holds while the play runs: a play that ends first (a fault,
        its motion over) fails here, with its exit status and stderr, rather than the wait
        running out or the scenario going on without it."""
        wait_for(lambda: predicate() or self.proc.poll() is not None, what, timeout)
        if not predicate():
            rc = self.wait()
            raise AssertionError(f"the play exited {rc} before {what}: {self.err}")

    def kill(self):
        """SIGKILL: no controlled stop, no last words on the bus."""
        self.proc.send_signal(signal.SIGKILL)
        self.killed_at = time.monotonic()
        self.wait()


class Serve:
    """`motiond serve` in the background (its log in `log`), spoken to over its control socket.
    Killed with the plays when its test ends."""

    def __init__(self, config: pathlib.Path, folder: pathlib.Path):
        self.socket = folder / "control.sock"
        self.log = folder / "serve.log"
        self.proc = subprocess.Popen(
            motiond_command("serve", "--config", str(config), "--socket", str(self.socket)),
            stdout=subprocess.DEVNULL,
            stderr=open(self.log, "w"),
        )
        Play.running.append(self)
        self.wait_for(lambda s: s["state"] != "disabled", what="the drives enabled")
        # The library loads behind the socket: `play` refuses a motion still loading.
        deadline = time.monotonic() + 60
        while any(m.get("loading") for m in self.request(cmd="list")["motions"]):
            assert time.monotonic() < deadline, "the library never loaded"
            time.sleep(0.02)

    def request(self, **req) -> dict:
        """One request, its reply (retried while the socket is not there yet)."""
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
                    c.settimeout(60)
                    c.connect(str(self.socket))
                    c.sendall(json.dumps(req).encode() + b"\n")
                    reply = b""
                    while not reply.endswith(b"\n"):
                        chunk = c.recv(65536)
                        if not chunk:
                            break
                        reply += chunk
                return json.loads(reply)
            except (FileNotFoundError, ConnectionRefusedError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"motiond serve is not serving: {self.log.read_text()}")
                time.sleep(0.05)

    def status(self) -> dict:
        return self.request(cmd="status")

    def wait_for(self, done, what: str, timeout: float = 60.0) -> dict:
        """Polls `status` until `done(status)` (a liveness bound, not a speed check)."""
        deadline = time.monotonic() + timeout
        while True:
            s = self.status()
            if done(s):
                return s
            if time.monotonic() > deadline:
                raise AssertionError(f"never {what}: last status {s}\n{self.log.read_text()}")
            time.sleep(0.02)


def wait_for(predicate, what="done", timeout=60.0, why=lambda: ""):
    """Polls `predicate` until it holds; `timeout` only bounds a hang (a liveness bound, never a
    speed check: a loaded machine may stall motiond or a peer for seconds); `why()` says what
    was seen."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"never {what}: {why()}"
        time.sleep(0.002)


def _behind(behind) -> bool:
    try:
        return behind()
    except (OSError, ValueError):  # a peer closing meanwhile: nothing more comes to it
        return False


def settle(count, quiet=0.25, timeout=60.0):
    """Waits until nothing waits unread on any running peer's line and `count()` (frames a peer
    has taken in) has stopped growing for `quiet` seconds: a Python peer may still be working
    through what motiond sent before it exited (a peer stalled on a loaded machine has its
    frames waiting, so the quiet alone is not taken for the end). A count still growing, or
    frames still unread, at `timeout` fails: the checks after it would judge half a stream."""
    deadline = time.monotonic() + timeout
    last, since = count(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.02)
        now = count()
        if now != last or any(_behind(b) for b in list(BEHIND)):
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
    behind = sum(1 for b in list(BEHIND) if _behind(b))
    raise AssertionError(
        f"the peers never settled in {timeout} s: {count()} frames taken in, the last change "
        f"{time.monotonic() - since:.2f} s ago, {behind} peer(s) with frames unread"
    )


def follows(streamed, want, close=lambda x, y: x == y):
    """`streamed` is `want` sample after sample, one a command: held at the first sample before
    the motion starts and at the last after it ends, and in between nothing skipped (a step the
    drive takes in one tick) and nothing repeated (the path stalling): a late loop delays the
    path, never skips or holds along it. `close(streamed, sampled)`: equal as the protocol
    carries it (a count, a float32). Samples the protocol carries alike (a motion near rest
    quantised to one count) are told apart by their place only, so any placement of the
    motion's start in the leading hold that matches whole is taken."""
    assert want, "no trajectory to follow"
    assert streamed, "nothing was streamed"
    n = len(want)
    lead = next((k for k, s in enumerate(streamed) if not close(s, want[0])), len(streamed))
    best = (-1, 0)  # (samples matched, start) of the placement that matched furthest
    for start in range(lead, -1, -1):
        matched = 0
        while matched < n and start + matched < len(streamed) and close(streamed[start + matched], want[matched]):
            matched += 1
        if matched == n and all(close(s, want[-1]) for s in streamed[start + n :]):
            return
        best = max(best, (matched, start))
    matched, start = best
    k = start + matched
    if matched == n:
        after = next(m for m in range(k, len(streamed)) if not close(streamed[m], want[-1]))
        raise AssertionError(f"command {after} ({streamed[after]}) after the motion ended at {want[-1]}")
    if k == len(streamed):
        raise AssertionError(f"the stream ended at sample {matched} of {n} ({want[matched]})")
    got = streamed[k]
    ahead = next((m for m in range(matched + 1, n) if close(got, want[m])), None)
    if ahead is not None:
        raise AssertionError(
            f"command {k} ({got}) skipped samples {matched}..{ahead - 1} of {n} ({want[matched]} ...)"
        )
    if matched > 0 and close(got, want[matched - 1]):
        raise AssertionError(f"command {k} ({got}) repeated sample {matched - 1} of {n} ({want[matched - 1]})")
    raise AssertionError(f"command {k} ({got}) is not sample {matched} of {n} ({want[matched]}) nor any after it")


def find_run(streamed: list, want: list, close) -> int:
    """Where `want` appears in `streamed` as a contiguous run (every element `close`); -1 if not."""
    n = len(want)
    for start in range(0, len(streamed) - n + 1):
        if close(streamed[start], want[0]) and all(
            close(streamed[start + i], want[i]) for i in range(n)
        ):
            return start
    return -1


class FrameLog:
    """Every frame a peer saw, with its arrival time (thread-safe)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.frames = []

    def add(self, msg):
        with self.lock:
            self.frames.append((time.monotonic(), msg))

    def all(self):
        with self.lock:
            return list(self.frames)


def teach_in_by_hand(bus, motor, config, folder, step):
    """Teach-in through `motiond serve` (`config` with a motion library) with a peer whose motors
    take commands with gains (`motor.commands`: dicts with `p` and `kp`; `motor.position`, both
    under `bus.lock`): `record` → the motor gets zero gains, a hand moves it to 0.3 rad and the
    daemon reads it there (within `step`), `record --stop` → the first command with gains again
    targets where the hand left it. Returns the serve."""
    serve = Serve(config, folder)
    assert serve.request(cmd="record", motion="taught")["ok"]
    deadline = time.monotonic() + 60
    while not (motor.commands and motor.commands[-1]["kp"] == 0.0):
        assert time.monotonic() < deadline, "never compliant"
        time.sleep(0.002)
    for k in range(1, 51):
        with bus.lock:
            motor.position = 0.006 * k
        time.sleep(0.02)
    serve.wait_for(lambda s: abs(s["positions"]["a"] - 0.3) < step, "the hand's position read")
    with bus.lock:
        n = len(motor.commands)
    assert serve.request(cmd="record", stop=True)["ok"]
    serve.wait_for(lambda s: s["state"] in ("idle", "holding"), "stiff again")
    while len(motor.commands) <= n + 5:
        assert time.monotonic() < deadline + 60, "no commands after stiffening"
        time.sleep(0.002)
    with bus.lock:
        stiff = next(c for c in motor.commands[n:] if c["kp"] > 0)
    assert abs(stiff["p"] - 0.3) <= step, f"stiff at {stiff['p']}, the hand left it at 0.3"
    return serve
