"""The stops on the wire (issue 28), per protocol, through `motiond serve` at 100 Hz: what the
drives receive on a drive fault, a drive's own E-stop, a fault during a teach-in on the same bus
and on another, a stalled peer (then drained), `disable` and SIGTERM during a
fault's quick stop, `disable` then an E-stop (or a fault), SIGTERM then a fault. Every setpoint
each drive took, decoded by the protocol's third-party peer, is checked as the drive saw the
consecutive setpoints: positions and velocities (feed-forward or command) inside the rig's limits
by finite differences, within the protocol's quantisation; power is removed only at rest; the
drives stiffen where a teach-in's hand left them; the stream ends at rest. The worst share of each
limit per protocol is printed at the end of the suite (conftest)."""

import math
import signal
import time

import pytest

import cia402_peer
import dynamixel_peer
import harness
import mit_peer
import odrive_peer
from harness import Link, write_config, write_motion

RATE = 100
DT = 1.0 / RATE
# The rig's limits (robot.skel), every joint alike.
POSITION, VELOCITY, ACCELERATION = 2.5, 2.0, 8.0
JOINTS = ("a", "b", "v")


# ---------------------------------------------------------------------------------------------
# Each protocol: its drives as peers on one link (or the joint b alone on a second link), the
# configuration, how a drive faults or presses its own E-stop, a hand moving a compliant joint,
# and per joint the setpoints the drive took in joint units, split where its power went off.


class Segment(list):
    """Consecutive setpoints a drive followed with power: (position or None, velocity or None)."""


class Cia402:
    """Two CiA 402 drives (a: node 5, b: node 6, cyclic synchronous position, counts); the
    velocity joint on an MIT motor that only answers."""

    name = "cia402"
    estop = True
    checked = ("a", "b")
    nodes = {"a": 5, "b": 6}
    sign = {"a": 1, "b": -1}
    counts = 10000

    def q(self, joint):
        return (1.0 / self.counts, None)

    def __init__(self, links):
        first = [5] + ([] if len(links) > 1 else [6])
        self.peers = [cia402_peer.Bus(links[0], first)]
        self.echo = cia402_peer.MitEcho(self.peers[0])
        if len(links) > 1:
            self.peers.append(cia402_peer.Bus(links[1], [6]))
        self.links = links

    def drive(self, joint):
        n = self.nodes[joint]
        return next(p.drives[n] for p in self.peers if n in p.drives)

    def buses(self):
        def joint(j):
            d = "direction: -1, " if self.sign[j] < 0 else ""
            return f"      {j}: {{protocol: cia402, id: {self.nodes[j]}, {d}counts_per_unit: {self.counts}}}\n"

        def bus(name, link, joints):
            return (
                f"  - name: {name}\n    transport: slcan\n    device: {link.device}\n"
                f"    heartbeat_ms: 200\n    watchdog_ms: {harness.WATCHDOG_MS}\n"
                "    feedback_timeout_ms: 500\n    joints:\n" + "".join(joints)
            )

        mit = "      v: {protocol: mit, id: 9, mit: {kp: 0, kd: 1}}\n"
        if len(self.links) == 1:
            return bus("arm", self.links[0], [joint("a"), joint("b"), mit])
        return bus("arm", self.links[0], [joint("a"), mit]) + bus("wrist", self.links[1], [joint("b")])

    def fault(self, joint):
        self.drive(joint).fault(0x2310, 0x03)

    def press_estop(self, joint):
        self.drive(joint).press_estop()

    def release_estop(self, joint):
        self.drive(joint).release_estop()

    def compliant(self, joint):
        return self.drive(joint).state == "switched_on"

    def powered(self, joint):
        return self.drive(joint).state == "enabled"

    def hand(self, joint, rad):
        d = self.drive(joint)
        with d.lock:
            if d.state != "enabled":  # a drive with torque holds against the hand
                d.position = round(rad * self.sign[joint] * self.counts)

    def drained(self):
        return not any(p.network.bus.serialPortOrig.in_waiting for p in self.peers)

    def stall(self, seconds):
        locks = [d.lock for p in self.peers for d in p.drives.values()]
        for lock in locks:
            lock.acquire()
        time.sleep(seconds)
        for lock in locks:
            lock.release()

    def segments(self, joint):
        d = self.drive(joint)
        with d.lock:
            stream = list(d.stream)
        out, seg = [], Segment()
        for powered, target in stream:
            if powered:
                seg.append((target * self.sign[joint] / self.counts, None))
            elif seg:
                out.append(seg)
                seg = Segment()
        return out + ([seg] if seg else [])

    def close(self):
        self.echo.stop()
        for p in self.peers:
            p.close()


class Odrive:
    """Three ODrive axes (firmware 0.6.10's DBC): a and b in position control (b geared 9:1,
    reversed), v in velocity control."""

    name = "odrive"
    estop = True
    checked = JOINTS
    nodes = {"a": 1, "b": 2, "v": 3}
    turns_per_rad = {"a": 1 / (2 * math.pi), "b": -9 / (2 * math.pi), "v": 1 / (2 * math.pi)}

    def q(self, joint):
        # Input_Pos and Input_Vel are float32 turns; Vel_FF counts 0.001 turns/s.
        rad = 1 / abs(self.turns_per_rad[joint])
        return (1e-6 * rad, (0.001 if joint != "v" else 1e-6) * rad)

    def __init__(self, links):
        if len(links) == 1:
            self.peers = [odrive_peer.Bus(links[0], [1, 2, 3])]
        else:
            self.peers = [odrive_peer.Bus(links[0], [1, 3]), odrive_peer.Bus(links[1], [2])]
        self.links = links

    def peer(self, joint):
        return next(p for p in self.peers if self.nodes[joint] in p.axes)

    def axis(self, joint):
        return self.peer(joint).axes[self.nodes[joint]]

    def buses(self):
        ep = (
            f"endpoints: {{watchdog_timeout: {odrive_peer.ENDPOINT_WATCHDOG_TIMEOUT}, "
            f"enable_watchdog: {odrive_peer.ENDPOINT_ENABLE_WATCHDOG}}}"
        )

        def joint(j):
            gear = ", gear_ratio: 9, direction: -1" if j == "b" else ""
            return f"      {j}: {{protocol: odrive, id: {self.nodes[j]}{gear}, firmware: '0.6', {ep}}}\n"

        def bus(name, link, joints):
            return (
                f"  - name: {name}\n    transport: slcan\n    device: {link.device}\n"
                f"    feedback_timeout_ms: 500\n    watchdog_ms: {harness.WATCHDOG_MS}\n"
                "    joints:\n" + "".join(joint(j) for j in joints)
            )

        if len(self.links) == 1:
            return bus("drives", self.links[0], "abv")
        return bus("drives", self.links[0], "av") + bus("wrist", self.links[1], "b")

    def fault(self, joint):
        with self.peer(joint).lock:
            self.axis(joint).error = 0x100  # motor failed: the axis stops following
            self.axis(joint).state = odrive_peer.IDLE

    def press_estop(self, joint):
        self.peer(joint).press_estop(self.nodes[joint])

    def release_estop(self, joint):
        self.peer(joint).release_estop(self.nodes[joint])

    def compliant(self, joint):
        return self.axis(joint).state == odrive_peer.IDLE

    def powered(self, joint):
        return self.axis(joint).state == odrive_peer.CLOSED_LOOP

    def hand(self, joint, rad):
        with self.peer(joint).lock:
            if self.axis(joint).state != odrive_peer.CLOSED_LOOP:  # else it holds against the hand
                self.axis(joint).position = rad * self.turns_per_rad[joint]

    def drained(self):
        return not any(p.can.serialPortOrig.in_waiting for p in self.peers)

    def stall(self, seconds):
        for p in self.peers:
            p.lock.acquire()
        time.sleep(seconds)
        for p in self.peers:
            p.lock.release()

    def segments(self, joint):
        with self.peer(joint).lock:
            stream = list(self.axis(joint).stream)
        k = 1 / self.turns_per_rad[joint]
        out, seg = [], Segment()
        for closed, name, s in stream:
            if closed and name == "Set_Input_Pos":
                seg.append((s["Input_Pos"] * k, s["Vel_FF"] * k))
            elif closed and name == "Set_Input_Vel":
                seg.append((None, s["Input_Vel"] * k))
            elif seg:
                out.append(seg)
                seg = Segment()
        return out + ([seg] if seg else [])

    def close(self):
        for p in self.peers:
            p.close()


class Mit:
    """Three MIT-mode motors (Mini Cheetah ranges): position, velocity and gains every command.
    They have no fault report and no E-stop of their own: a motor that stops answering is the
    fault (no feedback); they keep holding in a teach-in (no torque-off mode that still reports)."""

    name = "mit"
    estop = False
    checked = JOINTS
    nodes = {"a": 1, "b": 2, "v": 3}
    def q(self, joint):
        return (25.0 / 65535, 130.0 / 4095)

    def __init__(self, links):
        if len(links) == 1:
            self.peers = [mit_peer.Bus(links[0], [1, 2, 3])]
        else:
            self.peers = [mit_peer.Bus(links[0], [1, 3]), mit_peer.Bus(links[1], [2])]
        self.links = links

    def motor(self, joint):
        n = self.nodes[joint]
        return next(p.motors[n] for p in self.peers if n in p.motors)

    def buses(self):
        def joint(j):
            return f"      {j}: {{protocol: mit, id: {self.nodes[j]}, mit: {{kp: 40, kd: 1.5}}}}\n"

        def bus(name, link, joints):
            return (
                f"  - name: {name}\n    transport: slcan\n    device: {link.device}\n"
                "    feedback_timeout_ms: 500\n    joints:\n" + "".join(joint(j) for j in joints)
            )

        if len(self.links) == 1:
            return bus("legs", self.links[0], "abv")
        return bus("legs", self.links[0], "av") + bus("hip", self.links[1], "b")

    def fault(self, joint):
        self.motor(joint).silent = True

    def compliant(self, joint):
        return False

    def powered(self, joint):
        return self.motor(joint).enabled

    def hand(self, joint, rad):
        pass  # a motor holding its position: no hand moves it

    def drained(self):
        return not any(p.can.serialPortOrig.in_waiting for p in self.peers)

    def stall(self, seconds):
        for p in self.peers:
            p.lock.acquire()
        time.sleep(seconds)
        for p in self.peers:
            p.lock.release()

    def segments(self, joint):
        out, seg = [], Segment()
        for c in list(self.motor(joint).stream):
            if c is not None:
                seg.append((c["p"], c["v"]))
            elif seg:
                out.append(seg)
                seg = Segment()
        return out + ([seg] if seg else [])

    def close(self):
        for p in self.peers:
            p.close()


class Dynamixel:
    """Three DYNAMIXEL X servos (Protocol 2.0): a and b in position mode (b reversed), v in
    velocity mode. The fault is a hardware error alert (the servo drops its torque); no E-stop
    of their own."""

    name = "dynamixel"
    estop = False
    checked = JOINTS
    ids = {"a": 1, "b": 2, "v": 3}
    sign = {"a": 1, "b": -1, "v": 1}
    per_rad = 4096 / (2 * math.pi)
    def q(self, joint):
        return (2 * math.pi / 4096, dynamixel_peer.VEL_UNIT_RAD_S)

    def __init__(self, links):
        S = dynamixel_peer.Servo
        if len(links) == 1:
            self.peers = [dynamixel_peer.Chain(links[0], [S(1), S(2), S(3)])]
        else:
            self.peers = [dynamixel_peer.Chain(links[0], [S(1), S(3)]), dynamixel_peer.Chain(links[1], [S(2)])]
        self.links = links

    def chain(self, joint):
        return next(p for p in self.peers if self.ids[joint] in p.servos)

    def servo(self, joint):
        return self.chain(joint).servos[self.ids[joint]]

    def buses(self):
        def joint(j):
            d = ", direction: -1" if self.sign[j] < 0 else ""
            return f"      {j}: {{id: {self.ids[j]}{d}}}\n"

        def bus(name, link, joints):
            return (
                f"  - name: {name}\n    transport: serial\n    device: {link.device}\n"
                "    baud: 4000000\n    protocol: dynamixel\n"
                f"    feedback_timeout_ms: 500\n    watchdog_ms: {harness.WATCHDOG_MS}\n"
                "    joints:\n" + "".join(joint(j) for j in joints)
            )

        if len(self.links) == 1:
            return bus("servos", self.links[0], "abv")
        return bus("servos", self.links[0], "av") + bus("wrist", self.links[1], "b")

    def fault(self, joint):
        self.chain(joint).alert(self.ids[joint])

    def compliant(self, joint):
        return self.servo(joint).torque == 0

    def powered(self, joint):
        return self.servo(joint).torque == 1

    def hand(self, joint, rad):
        with self.chain(joint).lock:
            if not self.servo(joint).torque:  # with torque on it holds against the hand
                self.servo(joint).present = 2048 + round(rad * self.sign[joint] * self.per_rad)

    def drained(self):
        return not any(p.port.in_waiting for p in self.peers)

    def stall(self, seconds):
        for p in self.peers:
            p.lock.acquire()
        time.sleep(seconds)
        for p in self.peers:
            p.lock.release()

    def segments(self, joint):
        with self.chain(joint).lock:
            stream = list(self.servo(joint).stream)
        sign = self.sign[joint]
        out, seg = [], Segment()
        for following, kind, value in stream:
            if following and kind == "pos":
                seg.append(((value - 2048) * sign / self.per_rad, None))
            elif following and kind == "vel":
                seg.append((None, value * sign * dynamixel_peer.VEL_UNIT_RAD_S))
            elif seg:
                out.append(seg)
                seg = Segment()
        return out + ([seg] if seg else [])

    def close(self):
        for p in self.peers:
            p.close()


PROTOCOLS = {p.name: p for p in (Cia402, Odrive, Mit, Dynamixel)}


# ---------------------------------------------------------------------------------------------
# The checks.


def shares(seg, q):
    """The worst share of each limit over one segment as its drive saw the setpoints: what
    motiond meant lies within one quantum of each value the drive decoded (a protocol's integer
    or 12-bit fields), so each finite difference is taken less what quantisation can add (the
    share motiond's stream has at least), and must be inside the limit. Also the raw shares."""
    qp, qv = q
    qv = qv or 0.0
    worst, raw = {}, {}  # the measures the protocol's fields allow

    def note(measure, value, limit, slack):
        worst[measure] = max(worst.get(measure, 0.0), (abs(value) - slack) / limit)
        raw[measure] = max(raw.get(measure, 0.0), abs(value) / limit)

    ps = [p for p, _ in seg]
    vs = [v for _, v in seg]
    for k in range(len(seg)):
        if ps[k] is not None:
            note("position", ps[k], POSITION, qp)
            if k >= 1 and ps[k - 1] is not None:
                note("velocity", (ps[k] - ps[k - 1]) / DT, VELOCITY, qp / DT)
            if k >= 2 and ps[k - 1] is not None and ps[k - 2] is not None:
                note("acceleration", (ps[k] - 2 * ps[k - 1] + ps[k - 2]) / DT**2, ACCELERATION, 2 * qp / DT**2)
        if vs[k] is not None:
            note("velocity field", vs[k], VELOCITY, qv)
            if k >= 1 and vs[k - 1] is not None:
                note("velocity step", (vs[k] - vs[k - 1]) / DT, ACCELERATION, qv / DT)
    return worst, raw


def at_rest(seg, q):
    """The segment's last setpoints hold one pose: position unchanged, velocity 0."""
    qp, qv = q
    (p1, v1), (p2, v2) = seg[-2], seg[-1]
    still = p1 is None or abs(p2 - p1) <= 2 * qp + 1e-9
    return still and (v2 is None or abs(v2) <= (qv or 0.0) + 1e-9)


def check(rig, scenario, cut_by_peer=(), at_rest_ends=True):
    """Every segment of every checked joint inside the limits; each ends at rest (power removed
    only at rest, the stream ended at rest), but where the peer itself cut the power (its fault
    or E-stop). Records the worst shares for the suite's closing line."""
    # The peers take in what motiond has sent (they fall behind on a loaded machine).
    for _ in range(3):
        wait_for(rig.drained, "the peers drained")
        time.sleep(0.05)
    took = [j for j in rig.checked if rig.segments(j)]
    assert took, f"{rig.name} {scenario}: no drive took a setpoint"
    for j in took:
        segs = rig.segments(j)
        for n, seg in enumerate(segs):
            worst, raw = shares(seg, rig.q(j))
            harness.note_stop_shares(rig.name, scenario, worst, raw)
            bad = [m for m, share in worst.items() if share > 1 + 1e-9]
            assert not bad, f"{rig.name} {scenario}: {j} segment {n}: {bad} beyond the limits: {worst}"
            cut = j in cut_by_peer and n == len(segs) - 1
            if at_rest_ends and len(seg) >= 2 and not cut:
                assert at_rest(seg, rig.q(j)), f"{rig.name} {scenario}: {j} segment {n} ends moving: {seg[-3:]}"


def fastest(rig):
    """The fastest the last checked joint was commanded (the scenario stopped something that
    moved)."""
    fastest = 0.0
    for seg in rig.segments(rig.checked[-1]):
        for k in range(1, len(seg)):
            (p0, v0), (p1, v1) = seg[k - 1], seg[k]
            speed = abs(v1) if v1 is not None else abs(p1 - p0) / DT
            fastest = max(fastest, speed)
    return fastest


# ---------------------------------------------------------------------------------------------
# The scenarios.


def wait_for(predicate, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.002)


@pytest.fixture(params=sorted(PROTOCOLS))
def protocol(request):
    return PROTOCOLS[request.param]


def start(protocol, link, tmp_path, two_buses=False, estop_drive=False):
    links = [link]
    if two_buses:
        second = tmp_path / "second"
        second.mkdir()
        links.append(Link(second))
    rig = protocol(links)
    library = tmp_path / "motions"
    library.mkdir()
    write_motion(library / "swing.seq")
    extra = "estop:\n  drive: true\n" if estop_drive else ""
    # Late ticks are the loaded machine's (each still advances the stream by one period): only
    # the drives' own watchdogs bound them here.
    rt = "  max_consecutive_overruns: 1000\n"
    config = write_config(tmp_path, rig.buses(), rate_hz=RATE, library=library, extra=extra, rt=rt)
    try:
        serve = harness.Serve(config, tmp_path)
    except BaseException:
        stop(rig)
        raise
    rig.serve = serve
    try:
        serve.wait_for(lambda s: s["state"] in ("idle", "holding"), "enabled")
    except BaseException:
        stop(rig)
        raise
    return rig


def stop(rig):
    rig.close()
    for link in rig.links[1:]:
        link.close()


def mid_motion(serve, progress=0.4):
    assert serve.request(cmd="play", motion="swing")["ok"]
    serve.wait_for(lambda s: s["state"] == "playing" and s.get("progress", 0) > progress, "mid-motion")


def at_rest_in(serve, state):
    return serve.wait_for(lambda s: s["state"] == state and not s["moving"], f"{state} at rest")


def sigterm(rig):
    """SIGTERM to the daemon: it ends at rest, exit 0, within its shutdown timeout (5 s) and the
    quick stop's time."""
    rig.serve.proc.send_signal(signal.SIGTERM)
    try:
        rc = rig.serve.proc.wait(15)
    except Exception:
        raise AssertionError(f"{rig.name}: no exit 15 s after SIGTERM: {rig.serve.log.read_text()}")
    assert rc == 0, f"{rig.name}: exit {rc}: {rig.serve.log.read_text()}"


def test_a_drive_fault_mid_motion(protocol, link, tmp_path):
    rig = start(protocol, link, tmp_path)
    try:
        mid_motion(rig.serve)
        rig.fault("b")
        at_rest_in(rig.serve, "fault")
        time.sleep(0.2)
        assert fastest(rig) > 0.5
        check(rig, "fault", cut_by_peer=("b",))
    finally:
        stop(rig)


def test_a_drives_own_estop_mid_motion(protocol, link, tmp_path):
    if not protocol.estop:
        pytest.skip(f"{protocol.name} drives have no E-stop of their own")
    rig = start(protocol, link, tmp_path, estop_drive=True)
    try:
        mid_motion(rig.serve)
        rig.press_estop("b")
        at_rest_in(rig.serve, "estop")
        time.sleep(0.2)
        check(rig, "drive E-stop", cut_by_peer=("b",))
    finally:
        stop(rig)


def teach_in_then_fault(rig, scenario):
    """A hand moves joint a of the compliant robot at 1 rad/s; b's drive faults meanwhile. The
    drives stiffen where they are (a where the hand left it) and hold."""
    serve = rig.serve
    reply = serve.request(cmd="record", motion="taught")
    assert reply["ok"], reply
    serve.wait_for(lambda s: s["state"] == "recording", "recording")
    if rig.name != "mit":
        wait_for(lambda: rig.compliant("a"), "a compliant")
    before = len(rig.segments("a"))
    # The hand goes on after the fault until the drive stiffens against it.
    for k in range(40):
        if k == 30:
            rig.fault("b")
        rig.hand("a", 0.01 * (k + 1))
        time.sleep(0.01)
    s = at_rest_in(serve, "fault")
    wait_for(lambda: rig.powered("a"), "a stiff again")
    time.sleep(0.3)
    check(rig, scenario, cut_by_peer=("b",))
    if rig.name != "mit":
        segs = rig.segments("a")
        assert len(segs) > before, f"{rig.name}: a never took a setpoint after the teach-in"
        held = segs[-1]
        # Stiff where the hand left it (the last position read), and held there.
        assert abs(held[0][0] - held[-1][0]) <= 2 * rig.q("a")[0], held[:3] + held[-3:]
        assert abs(held[-1][0] - s["positions"]["a"]) <= 0.05, (held[-1], s["positions"])
        assert held[-1][0] > 0.2, "the hand's motion was read"


def test_a_fault_during_a_teach_in(protocol, link, tmp_path):
    rig = start(protocol, link, tmp_path)
    try:
        teach_in_then_fault(rig, "teach-in + fault")
    finally:
        stop(rig)


def test_a_fault_on_another_bus_during_a_teach_in(protocol, link, tmp_path):
    rig = start(protocol, link, tmp_path, two_buses=True)
    try:
        teach_in_then_fault(rig, "teach-in + fault on another bus")
    finally:
        stop(rig)


def test_a_stalled_peer_then_drained(protocol, link, tmp_path):
    """The peer stops reading for a second mid-motion (what motiond writes waits in the link;
    its feedback stops: the fault feedback_missing), then takes it all in: what each drive takes
    after is continuous with what it took before. (A queue that refuses writes outright is
    tests/bus_loop.rs's, deterministic.)"""
    rig = start(protocol, link, tmp_path)
    try:
        mid_motion(rig.serve, progress=0.3)
        rig.stall(1.0)
        rig.serve.wait_for(lambda s: not s["moving"], "at rest")
        time.sleep(0.3)
        check(rig, "stalled, drained")
    finally:
        stop(rig)


def test_disable_during_a_faults_quick_stop(protocol, link, tmp_path):
    rig = start(protocol, link, tmp_path)
    try:
        mid_motion(rig.serve)
        rig.fault("b")
        time.sleep(0.02)
        assert rig.serve.request(cmd="disable")["ok"]
        # Power off at rest, in the fault; the state says disabled once it is cleared.
        wait_for(lambda: not rig.powered("a"), "a's power off")
        rig.serve.wait_for(lambda s: not s["moving"], "at rest")
        rig.serve.request(cmd="clear-fault")
        at_rest_in(rig.serve, "disabled")
        check(rig, "disable mid-stop", cut_by_peer=("b",))
    finally:
        stop(rig)


def test_sigterm_during_a_faults_quick_stop(protocol, link, tmp_path):
    rig = start(protocol, link, tmp_path)
    try:
        mid_motion(rig.serve)
        rig.fault("b")
        time.sleep(0.02)
        sigterm(rig)
        time.sleep(0.3)
        check(rig, "SIGTERM mid-stop", cut_by_peer=("b",))
    finally:
        stop(rig)


def test_disable_then_an_estop_or_fault(protocol, link, tmp_path):
    """An acknowledged `disable`, then the drive's E-stop (or a fault) before rest: power off at
    rest, and the drives stay off once it is released and cleared."""
    rig = start(protocol, link, tmp_path, estop_drive=protocol.estop)
    try:
        mid_motion(rig.serve)
        assert rig.serve.request(cmd="disable")["ok"]
        time.sleep(0.02)
        # An E-stop or a fault that comes once the drives are off changes nothing.
        if rig.estop:
            rig.press_estop("b")
            rig.serve.wait_for(lambda s: s["state"] in ("estop", "disabled") and not s["moving"], "at rest")
            rig.release_estop("b")
        else:
            rig.fault("b")
            rig.serve.wait_for(lambda s: s["state"] in ("fault", "disabled") and not s["moving"], "at rest")
        rig.serve.request(cmd="clear-fault")
        at_rest_in(rig.serve, "disabled")
        wait_for(lambda: not rig.powered("a"), "a's power off")
        wait_for(rig.drained, "the peers drained")
        taken = {j: sum(len(s) for s in rig.segments(j)) for j in rig.checked}
        time.sleep(0.5)
        assert rig.serve.status()["state"] == "disabled"
        assert not rig.powered("a"), "a powered again after the clear"
        assert {j: sum(len(s) for s in rig.segments(j)) for j in rig.checked} == taken
        check(rig, "disable, then E-stop or fault", cut_by_peer=("b",))
    finally:
        stop(rig)


def test_sigterm_then_a_fault(protocol, link, tmp_path):
    rig = start(protocol, link, tmp_path)
    try:
        mid_motion(rig.serve)
        rig.serve.proc.send_signal(signal.SIGTERM)
        time.sleep(0.03)
        rig.fault("b")
        rc = rig.serve.proc.wait(15)
        assert rc == 0, f"{rig.name}: exit {rc}: {rig.serve.log.read_text()}"
        time.sleep(0.3)
        check(rig, "SIGTERM, then fault", cut_by_peer=("b",))
    finally:
        stop(rig)
