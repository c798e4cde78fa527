"""The stops on the wire (issue 28), per protocol, through `motiond serve` at 100 Hz: what the
drives receive on a drive fault, a drive's own E-stop, a fault during a teach-in on the same bus
and on another, a transmit queue that fills (the link takes no more bytes) then drains, `disable`
and SIGTERM during a fault's quick stop, `disable` then an E-stop (or a fault), SIGTERM then a
fault. Every setpoint
each drive took, decoded by the protocol's third-party peer, is checked as the drive saw the
consecutive setpoints: positions and velocities (feed-forward or command) inside the rig's limits
by finite differences, within the protocol's quantisation; power is removed only at rest; the
drives stiffen where a teach-in's hand left them; the stream ends at rest. The worst share of each
limit per protocol is printed at the end of the suite and written to target/conformance-stops.md
(conftest). A family without an E-stop signal of its own skips that scenario, saying so."""

import json
import math
import signal
import termios
import time

import pytest

import cia402_peer
import damiao_peer
import dynamixel_peer
import feetech_peer
import harness
import mit_peer
import moteus_peer
import odrive_peer
import robstride_peer
from harness import WATCHDOG_MS, Link, wait_for, write_config, write_motion

RATE = 100
DT = 1.0 / RATE
# motiond's feedback timeout and its latest wake-up: long enough that a loaded machine stalling
# motiond or a peer for a few hundred milliseconds is not a fault here (none of these scenarios
# is about them). The drives' watchdogs are the families' scenarios' (harness.WATCHDOG_MS), which
# test_<family>.py test.
SLACK_MS = 1000
# The rig's limits (robot.skel), every joint alike.
POSITION, VELOCITY, ACCELERATION = 2.5, 2.0, 8.0
JOINTS = ("a", "b", "v")


# ---------------------------------------------------------------------------------------------
# Each protocol: its drives as peers on one link (or the joint b alone on a second link), the
# configuration, how a drive faults or presses its own E-stop, a hand moving a compliant joint,
# and per joint the setpoints the drive took in joint units, split where its power went off.


class Segment(list):
    """Consecutive setpoints a drive followed with power: (position or None, velocity or None)."""


class Rig:
    """What every protocol's rig shares: the peers (one per link: every joint on the first, or b
    alone on a second), the `buses:` section, the split of what each drive took into segments.
    A protocol gives `peer(link, joints)`, `line()` (its bus keys), `row(joint)` (its joint's
    keys), `stream(joint)` (what the drive took: (position, velocity) it followed, None where
    its power went off), `q(joint)` (its fields' quanta), and the world acting on its drives:
    `fault`, `compliant`, `powered`, `hand`, and with `estop` its own E-stop."""

    name = ""
    # No E-stop signal of its own; else `press_estop`/`release_estop`.
    estop = False
    joints = JOINTS
    skel = "robot.skel"
    ids = {"a": 1, "b": 2, "v": 3}

    # How long motiond waits for a report (a Python peer on a loaded machine can fall a second
    # behind); MIT motors fault by going silent, so theirs stays short.
    feedback_ms = 2 * SLACK_MS

    def __init__(self, links, watchdog_ms=WATCHDOG_MS, feedback_ms=None):
        self.links = links
        self.watchdog_ms = watchdog_ms
        self.feedback_ms = feedback_ms or self.feedback_ms
        if len(links) == 1:
            groups = [self.joints]
        else:
            groups = [tuple(j for j in self.joints if j != "b"), ("b",)]
        self.groups = list(zip(("arm", "wrist"), links, groups))
        self.peers = []
        try:
            for _, link, joints in self.groups:
                self.peers.append(self.peer(link, joints))
        except BaseException:
            self.close()
            raise
        self.owner = {j: p for p, (_, _, joints) in zip(self.peers, self.groups) for j in joints}

    @property
    def checked(self):
        return self.joints

    def buses(self):
        return "".join(
            f"  - name: {name}\n    device: {link.device}\n{self.line()}"
            f"    feedback_timeout_ms: {self.feedback_ms}\n    joints:\n"
            + "".join(f"      {j}: {{{self.row(j)}}}\n" for j in joints)
            for name, link, joints in self.groups
        )


    def drained(self):
        return not any(p.behind() for p in self.peers)

    def recover(self, joint):
        """The cause of `fault(joint)` gone (for drives whose fault outlasts a clear)."""

    def segments(self, joint):
        out, seg = [], Segment()
        for item in self.stream(joint):
            if item is not None:
                seg.append(item)
            elif seg:
                out.append(seg)
                seg = Segment()
        return out + ([seg] if seg else [])

    def ended(self, joint):
        """The drive's stream has come to an end: its power went off, or it holds at rest."""
        stream = self.stream(joint)
        if not stream or stream[-1] is None:
            return True
        seg = self.segments(joint)[-1]
        return len(seg) >= 2 and at_rest(seg, self.q(joint))

    def close(self):
        for p in self.peers:
            p.close()


class Cia402(Rig):
    """Two CiA 402 drives (a: node 5, b: node 6, cyclic synchronous position, counts); the
    velocity joint on an MIT motor that only answers."""

    name = "cia402"
    estop = True
    checked = ("a", "b")
    ids = {"a": 5, "b": 6, "v": 9}
    sign = {"a": 1, "b": -1}
    counts = 10000

    def q(self, joint):
        return (1.0 / self.counts, None)

    def peer(self, link, joints):
        bus = cia402_peer.Bus(link, [self.ids[j] for j in joints if j != "v"])
        if "v" in joints:
            self.echo = cia402_peer.MitEcho(bus)
        return bus

    def drive(self, joint):
        return self.owner[joint].drives[self.ids[joint]]

    def line(self):
        # Twice the heartbeat without one is a fault: the peers' producers stall on a loaded machine.
        return f"    transport: slcan\n    heartbeat_ms: {SLACK_MS // 2}\n    watchdog_ms: {self.watchdog_ms}\n"

    def row(self, j):
        if j == "v":
            return "protocol: mit, id: 9, mit: {kp: 0, kd: 1}"
        d = "direction: -1, " if self.sign[j] < 0 else ""
        return f"protocol: cia402, id: {self.ids[j]}, {d}counts_per_unit: {self.counts}"

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


    def stream(self, joint):
        d = self.drive(joint)
        with d.lock:
            stream = list(d.stream)
        k = self.sign[joint] / self.counts
        return [(target * k, None) if powered else None for powered, target in stream]

    def close(self):
        if hasattr(self, "echo"):
            self.echo.stop()
        super().close()


class Odrive(Rig):
    """Three ODrive axes (firmware 0.6.10's DBC): a and b in position control (b geared 9:1,
    reversed), v in velocity control."""

    name = "odrive"
    estop = True
    turns_per_rad = {"a": 1 / (2 * math.pi), "b": -9 / (2 * math.pi), "v": 1 / (2 * math.pi)}

    def q(self, joint):
        # Input_Pos and Input_Vel are float32 turns; Vel_FF counts 0.001 turns/s.
        rad = 1 / abs(self.turns_per_rad[joint])
        return (1e-6 * rad, (0.001 if joint != "v" else 1e-6) * rad)

    def peer(self, link, joints):
        return odrive_peer.Bus(link, [self.ids[j] for j in joints])

    def axis(self, joint):
        return self.owner[joint].axes[self.ids[joint]]

    def line(self):
        return f"    transport: slcan\n    watchdog_ms: {self.watchdog_ms}\n"

    def row(self, j):
        gear = ", gear_ratio: 9, direction: -1" if j == "b" else ""
        ep = (
            f"endpoints: {{watchdog_timeout: {odrive_peer.ENDPOINT_WATCHDOG_TIMEOUT}, "
            f"enable_watchdog: {odrive_peer.ENDPOINT_ENABLE_WATCHDOG}}}"
        )
        return f"protocol: odrive, id: {self.ids[j]}{gear}, firmware: '0.6', {ep}"

    def fault(self, joint):
        with self.owner[joint].lock:
            self.axis(joint).error = 0x100  # motor failed: the axis stops following
            self.axis(joint).state = odrive_peer.IDLE

    def press_estop(self, joint):
        self.owner[joint].press_estop(self.ids[joint])

    def release_estop(self, joint):
        self.owner[joint].release_estop(self.ids[joint])

    def compliant(self, joint):
        return self.axis(joint).state == odrive_peer.IDLE

    def powered(self, joint):
        return self.axis(joint).state == odrive_peer.CLOSED_LOOP

    def hand(self, joint, rad):
        with self.owner[joint].lock:
            if self.axis(joint).state != odrive_peer.CLOSED_LOOP:  # else it holds against the hand
                self.axis(joint).position = rad * self.turns_per_rad[joint]


    def stream(self, joint):
        with self.owner[joint].lock:
            stream = list(self.axis(joint).stream)
        k = 1 / self.turns_per_rad[joint]
        out = []
        for closed, name, s in stream:
            if closed and name == "Set_Input_Pos":
                out.append((s["Input_Pos"] * k, s["Vel_FF"] * k))
            elif closed and name == "Set_Input_Vel":
                out.append((None, s["Input_Vel"] * k))
            else:
                out.append(None)
        return out


class Mit(Rig):
    """Three MIT-mode motors (Mini Cheetah ranges): position, velocity and gains every command.
    They have no fault report and no E-stop of their own: a motor that stops answering is the
    fault (no feedback); they keep holding in a teach-in (no torque-off mode that still reports)."""

    name = "mit"
    # The fault: a motor gone silent, found by the feedback timeout (short, but twice the 0.5 s a
    # peer was seen to stall on the loaded machine).
    feedback_ms = SLACK_MS

    def q(self, joint):
        return (25.0 / 65535, 130.0 / 4095)

    def peer(self, link, joints):
        return mit_peer.Bus(link, [self.ids[j] for j in joints])

    def motor(self, joint):
        return self.owner[joint].motors[self.ids[joint]]

    def line(self):
        return "    transport: slcan\n"

    def row(self, j):
        return f"protocol: mit, id: {self.ids[j]}, mit: {{kp: 40, kd: 1.5}}"

    def fault(self, joint):
        self.motor(joint).silent = True

    def compliant(self, joint):
        return False

    def powered(self, joint):
        return self.motor(joint).enabled

    def hand(self, joint, rad):
        pass  # a motor holding its position: no hand moves it

    def stream(self, joint):
        with self.owner[joint].lock:
            stream = list(self.motor(joint).stream)
        return [None if c is None else (c["p"], c["v"]) for c in stream]


class Dynamixel(Rig):
    """Three DYNAMIXEL X servos (Protocol 2.0): a and b in position mode (b reversed), v in
    velocity mode. The fault is a hardware error alert (the servo drops its torque)."""

    name = "dynamixel"
    sign = {"a": 1, "b": -1, "v": 1}
    per_rad = 4096 / (2 * math.pi)

    def q(self, joint):
        return (2 * math.pi / 4096, dynamixel_peer.VEL_UNIT_RAD_S)

    def peer(self, link, joints):
        return dynamixel_peer.Chain(link, [dynamixel_peer.Servo(self.ids[j]) for j in joints])

    def servo(self, joint):
        return self.owner[joint].servos[self.ids[joint]]

    def line(self):
        return (
            "    transport: serial\n    baud: 4000000\n    protocol: dynamixel\n"
            f"    watchdog_ms: {self.watchdog_ms}\n"
        )

    def row(self, j):
        return f"id: {self.ids[j]}" + (", direction: -1" if self.sign[j] < 0 else "")

    def fault(self, joint):
        self.owner[joint].alert(self.ids[joint])

    def compliant(self, joint):
        return self.servo(joint).torque == 0

    def powered(self, joint):
        return self.servo(joint).torque == 1

    def hand(self, joint, rad):
        with self.owner[joint].lock:
            if not self.servo(joint).torque:  # with torque on it holds against the hand
                self.servo(joint).present = 2048 + round(rad * self.sign[joint] * self.per_rad)


    def stream(self, joint):
        with self.owner[joint].lock:
            stream = list(self.servo(joint).stream)
        sign = self.sign[joint]
        out = []
        for following, kind, value in stream:
            if following and kind == "pos":
                out.append(((value - 2048) * sign / self.per_rad, None))
            elif following and kind == "vel":
                out.append((None, value * sign * dynamixel_peer.VEL_UNIT_RAD_S))
            else:
                out.append(None)
        return out


class Gains(Rig):
    """Motors commanded MIT-style (position, velocity, kp, kd, torque every frame) whose teach-in
    is zero gains with the motor still enabled: a position joint follows a command with kp > 0,
    the velocity joint one with kd > 0; a command without them (or the motor leaving its enabled
    state: the peer's None) ends what the drive followed."""

    def motor(self, joint):
        return self.owner[joint].motors[self.ids[joint]]

    def stiff(self, joint):
        commands = self.motor(joint).commands
        return not commands or commands[-1]["kp" if joint != "v" else "kd"] > 0

    def compliant(self, joint):
        return self.enabled(self.motor(joint)) and not self.stiff(joint)

    def powered(self, joint):
        return self.enabled(self.motor(joint)) and self.stiff(joint)

    def hand(self, joint, rad):
        with self.owner[joint].lock:
            if self.compliant(joint):  # with gains it holds against the hand
                self.motor(joint).position = rad

    def stream(self, joint):
        with self.owner[joint].lock:
            stream = list(self.motor(joint).stream)
        out = []
        for c in stream:
            if c is None or c["kp" if joint != "v" else "kd"] <= 0:
                out.append(None)
            else:
                out.append((c["p"] if joint != "v" else None, c["v"]))
        return out


class Damiao(Gains):
    """Three Damiao motors (PMAX 12.5, VMAX 10, TMAX 28, MIT mode). The fault is a state nibble
    (0xE, overload: the motor stops following until cleared). No E-stop of their own."""

    name = "damiao"

    def q(self, joint):
        return (25.0 / 65535, 20.0 / 4095)

    def peer(self, link, joints):
        motors = [damiao_peer.Motor(self.ids[j], 0x10 + self.ids[j], (12.5, 10.0, 28.0)) for j in joints]
        return damiao_peer.Bus(link, motors)

    def enabled(self, motor):
        return motor.state == damiao_peer.ENABLED

    def line(self):
        return f"    transport: slcan\n    watchdog_ms: {self.watchdog_ms}\n"

    def row(self, j):
        i = self.ids[j]
        return (
            f"protocol: damiao, id: {i}, damiao: {{kp: 40, kd: 1.5, master_id: {0x10 + i}, "
            "p_max: 12.5, v_max: 10, t_max: 28}"
        )

    def fault(self, joint):
        self.owner[joint].set_state(self.ids[joint], 0xE)


class Robstride(Gains):
    """Three Robstride RS-03 motors in motion control. The fault is an over-temperature bit in the
    feedback with the motor back in reset mode (it stops following until a stop clears it). No
    E-stop of their own."""

    name = "robstride"
    model = "rs-03"

    def q(self, joint):
        p = robstride_peer.MODEL_MIT_POSITION_TABLE[self.model]
        v = robstride_peer.MODEL_MIT_VELOCITY_TABLE[self.model]
        # One count of the SDK's scaling, (x/max + 1)·0x7FFF.
        return (p / 0x7FFF, v / 0x7FFF)

    def peer(self, link, joints):
        return robstride_peer.Bus(link, [robstride_peer.Motor(self.ids[j], self.model) for j in joints])

    def enabled(self, motor):
        return motor.mode == robstride_peer.RUN

    def line(self):
        return f"    transport: slcan\n    watchdog_ms: {self.watchdog_ms}\n"

    def row(self, j):
        return f"protocol: robstride, id: {self.ids[j]}, robstride: {{model: {self.model}, kp: 60, kd: 2}}"

    def fault(self, joint):
        with self.owner[joint].lock:
            m = self.motor(joint)
            m.faults = 0x04  # over-temperature
            m.set_mode(robstride_peer.RESET)


class Moteus(Rig):
    """Three moteus controllers over CAN-FD (b reversed), a and b in position mode, v in velocity
    control (position NaN). The fault is mode 1 with code 39 (the controller stops following
    until a stop). No E-stop of their own (moteus reports none)."""

    name = "moteus"
    sign = {"a": 1, "b": -1, "v": 1}

    def q(self, joint):
        # float32 revolutions and revolutions/s.
        return (1e-6, 1e-6)

    def peer(self, link, joints):
        return moteus_peer.Bus(link, [self.ids[j] for j in joints])

    def servo(self, joint):
        return self.owner[joint].servos[self.ids[joint]]

    def line(self):
        return f"    transport: slcan\n    data_bitrate: 5000000\n    watchdog_ms: {self.watchdog_ms}\n"

    def row(self, j):
        return f"protocol: moteus, id: {self.ids[j]}" + (", direction: -1" if self.sign[j] < 0 else "")

    def fault(self, joint):
        with self.owner[joint].lock:
            s = self.servo(joint)
            s.set_mode(moteus_peer.FAULTED)
            s.fault = 39

    def compliant(self, joint):
        return self.servo(joint).mode == moteus_peer.STOPPED

    def powered(self, joint):
        return self.servo(joint).mode == moteus_peer.POSITION_MODE

    def hand(self, joint, rad):
        with self.owner[joint].lock:
            if self.servo(joint).mode != moteus_peer.POSITION_MODE:  # else it holds against the hand
                self.servo(joint).position = rad * self.sign[joint] / (2 * math.pi)

    def stream(self, joint):
        with self.owner[joint].lock:
            stream = list(self.servo(joint).stream)
        k = 2 * math.pi * self.sign[joint]
        out = []
        for w in stream:
            if w is None:
                out.append(None)
            else:
                p = w.get(moteus_peer.CMD_POSITION, math.nan)
                out.append((None if math.isnan(p) else p * k, w.get(moteus_peer.CMD_VELOCITY, 0.0) * k))
        return out


class Feetech(Rig):
    """Two Feetech STS servos (servos.skel: position joints only, b reversed). The fault is an
    overload (the servo cuts its torque, and stays limp until the overload is gone). No E-stop of
    their own, and no communication watchdog."""

    name = "feetech"
    joints = ("a", "b")
    skel = "servos.skel"
    sign = {"a": 1, "b": -1}
    per_rad = 4096 / (2 * math.pi)

    def q(self, joint):
        return (1 / self.per_rad, None)

    def peer(self, link, joints):
        return feetech_peer.Chain(link, [feetech_peer.Servo(self.ids[j], "sts", 2048) for j in joints])

    def servo(self, joint):
        return self.owner[joint].servos[self.ids[joint]]

    def line(self):
        return "    transport: serial\n    baud: 1000000\n    protocol: feetech\n"

    def row(self, j):
        return f"id: {self.ids[j]}" + (", direction: -1" if self.sign[j] < 0 else "")

    def fault(self, joint):
        self.owner[joint].fault(self.ids[joint], feetech_peer.FAULT["overload"])

    def recover(self, joint):
        self.owner[joint].clear(self.ids[joint])

    def compliant(self, joint):
        return self.servo(joint).torque == 0

    def powered(self, joint):
        return self.servo(joint).torque == 1

    def hand(self, joint, rad):
        self.owner[joint].move_by_hand(self.ids[joint], 2048 + round(rad * self.sign[joint] * self.per_rad))


    def stream(self, joint):
        with self.owner[joint].lock:
            stream = list(self.servo(joint).stream)
        k = self.sign[joint] / self.per_rad
        return [None if g is None else ((g - 2048) * k, None) for g in stream]


PROTOCOLS = {p.name: p for p in (Cia402, Odrive, Mit, Dynamixel, Damiao, Robstride, Moteus, Feetech)}


# ---------------------------------------------------------------------------------------------
# The checks.


def shares(seg, q):
    """The worst share of each limit over one segment as its drive saw the setpoints: what
    motiond meant lies within one quantum of each value the drive decoded (a protocol's integer
    or 12-bit fields), so each finite difference is taken less what quantisation can add (the
    share motiond's stream has at least), and must be inside the limit. Also the raw shares, and
    per measure what quantisation can add as a share of the limit: the measure cannot tell apart
    shares closer than that (a 2-count allowance near 1 hides the acceleration: the rehearsal of
    the same stop, `motiond rehearse` on the commanded stream, shows it)."""
    qp, qv = q
    qv = qv or 0.0
    worst, raw, allowance = {}, {}, {}  # the measures the protocol's fields allow

    def note(measure, value, limit, slack):
        worst[measure] = max(worst.get(measure, 0.0), (abs(value) - slack) / limit)
        raw[measure] = max(raw.get(measure, 0.0), abs(value) / limit)
        allowance[measure] = slack / limit

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
    return worst, raw, allowance


def at_rest(seg, q):
    """The segment's last setpoints hold one pose: position unchanged, velocity 0."""
    qp, qv = q
    (p1, v1), (p2, v2) = seg[-2], seg[-1]
    still = p1 is None or abs(p2 - p1) <= 2 * qp + 1e-9
    return still and (v2 is None or abs(v2) <= (qv or 0.0) + 1e-9)


def settled(rig, timeout=60.0):
    """Waits until every checked drive's stream has come to its end — its power went off, or it
    holds at rest — with nothing unread on any line: the peers have taken in what motiond sent
    (they fall behind on a loaded machine). A stream that never ends fails here, with the end of
    each drive's stream and which peers still had frames unread."""

    def seen():
        ends = {j: rig.stream(j)[-3:] for j in rig.checked}
        unended = [j for j in rig.checked if not rig.ended(j)]
        behind = [p.__class__.__module__ for p in rig.peers if p.behind()]
        return f"not ended: {unended}; peers with frames unread: {behind}; streams end {ends}"

    wait_for(
        lambda: rig.drained() and all(rig.ended(j) for j in rig.checked) and rig.drained(),
        f"{rig.name}: every drive's stream ended (power off, or held at rest)",
        timeout,
        why=seen,
    )


def check(rig, scenario, cut_by_peer=()):
    """Every segment of every checked joint inside the limits; each ends at rest (power removed
    only at rest, the stream ended at rest), but where the peer itself cut the power (its fault
    or E-stop). Records the worst shares for the suite's closing table."""
    settled(rig)
    errors = [e for p in rig.peers for e in getattr(p, "errors", [])]
    assert not errors, f"{rig.name} {scenario}: the peers refused frames: {errors[:5]}"
    took = [j for j in rig.checked if rig.segments(j)]
    assert took, f"{rig.name} {scenario}: no drive took a setpoint"
    for j in took:
        segs = rig.segments(j)
        for n, seg in enumerate(segs):
            worst, raw, allowance = shares(seg, rig.q(j))
            harness.note_stop_shares(rig.name, scenario, worst, raw, allowance)
            bad = [m for m, share in worst.items() if share > 1 + 1e-9]
            assert not bad, f"{rig.name} {scenario}: {j} segment {n}: {bad} beyond the limits: {worst}: {seg[:12]}"
            cut = j in cut_by_peer and n == len(segs) - 1
            if len(seg) >= 2 and not cut:
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
# The scenarios. They wait on states (the daemon's status, the drives' streams), never on time:
# the machine is loaded and its Python peers stall.


@pytest.fixture(params=sorted(PROTOCOLS))
def protocol(request):
    return PROTOCOLS[request.param]


def start(protocol, link, tmp_path, two_buses=False, estop_drive=False, **timeouts):
    """The protocol's rig and `motiond serve` on it, enabled; `timeouts`: the rig's watchdog_ms
    and feedback_ms."""
    links = [link]
    if two_buses:
        second = tmp_path / "second"
        second.mkdir()
        links.append(Link(second))
    try:
        rig = protocol(links, **timeouts)
    except BaseException:
        for extra in links[1:]:
            extra.close()
        raise
    try:
        library = tmp_path / "motions"
        library.mkdir()
        write_motion(library / "swing.seq", joints=rig.joints)
        extra = "estop:\n  drive: true\n" if estop_drive else ""
        # Late ticks are the loaded machine's (each still advances the stream by one period):
        # only the drives' own watchdogs bound them here.
        rt = "  max_consecutive_overruns: 1000\n"
        config = write_config(
            tmp_path, rig.buses(), rate_hz=RATE, library=library, extra=extra, rt=rt,
            joints=rig.joints, skel=rig.skel, max_late_ms=SLACK_MS,
        )
        rig.serve = harness.Serve(config, tmp_path)
        rig.serve.wait_for(lambda s: s["state"] in ("idle", "holding"), "enabled")
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


def stopping(serve, state="fault"):
    """The daemon in `state`, its quick stop under way (a later command lands within it)."""
    return serve.wait_for(lambda s: s["state"] == state, state)


def sigterm(rig):
    """SIGTERM to the daemon: it ends at rest, exit 0, within its shutdown timeout (5 s) and the
    quick stop's time."""
    rig.serve.proc.send_signal(signal.SIGTERM)
    try:
        rc = rig.serve.proc.wait(15)
    except Exception:
        raise AssertionError(f"{rig.name}: no exit 15 s after SIGTERM: {rig.serve.log.read_text()}")
    assert rc == 0, f"{rig.name}: exit {rc}: {rig.serve.log.read_text()}"


def no_estop(protocol):
    if not protocol.estop:
        pytest.skip(f"{protocol.name} drives report no E-stop of their own (docs/src/conformance.md)")


def test_a_drive_fault_mid_motion(protocol, link, tmp_path):
    rig = start(protocol, link, tmp_path)
    try:
        mid_motion(rig.serve)
        rig.fault("b")
        at_rest_in(rig.serve, "fault")
        check(rig, "fault", cut_by_peer=("b",))
        assert fastest(rig) > 0.5
    finally:
        stop(rig)


def test_a_drives_own_estop_mid_motion(protocol, link, tmp_path):
    no_estop(protocol)
    rig = start(protocol, link, tmp_path, estop_drive=True)
    try:
        mid_motion(rig.serve)
        rig.press_estop("b")
        at_rest_in(rig.serve, "estop")
        check(rig, "drive E-stop", cut_by_peer=("b",))
    finally:
        stop(rig)


def teach_in_then_fault(rig, scenario):
    """A hand moves joint a of the compliant robot towards 0.3 rad; b's drive faults once the
    daemon has read the hand past 0.2 rad, and the hand goes on until the drive stiffens against
    it. The drives stiffen where they are (a where the hand left it) and hold."""
    serve = rig.serve
    reply = serve.request(cmd="record", motion="taught")
    assert reply["ok"], reply
    serve.wait_for(lambda s: s["state"] == "recording", "recording")
    if rig.name != "mit":
        wait_for(lambda: rig.compliant("a"), "a compliant")
    before = len(rig.segments("a"))
    for k in range(1, 31):
        rig.hand("a", 0.01 * k)
        time.sleep(0.01)  # the hand's pace, not a wait for anything
    if rig.name != "mit":
        serve.wait_for(lambda s: s["positions"]["a"] > 0.2, "the hand's motion read")
    rig.fault("b")
    for k in range(31, 41):
        rig.hand("a", 0.01 * k)
        time.sleep(0.01)
    s = at_rest_in(serve, "fault")
    wait_for(lambda: rig.powered("a"), "a stiff again", why=lambda: (rig.serve.status(), rig.stream("a")[-4:]))
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


def test_a_full_transmit_queue_then_drained(protocol, link, tmp_path):
    """The link stops taking bytes mid-motion: its pseudo-terminal's output is stopped
    (`tcflow(TCOOFF)`, what an XOFF or an adapter that takes nothing more does to a serial
    line), so motiond's writes return EAGAIN — its transmit queue is full, the fault
    `queue_full` — until the output is restarted (`TCOON`) and the peer takes in what follows.
    What each drive takes after is continuous with what it took before (a setpoint that was not
    sent is not counted as sent). The drives' watchdogs and motiond's feedback timeout are set
    long here, so the full queue is the only cause however long the stall lasts on a loaded
    machine."""
    rig = start(protocol, link, tmp_path, watchdog_ms=10000, feedback_ms=10000)
    try:
        mid_motion(rig.serve, progress=0.3)
        taken = {j: len(rig.stream(j)) for j in rig.checked}
        termios.tcflow(link.keeper, termios.TCOOFF)
        try:
            s = stopping(rig.serve)
        finally:
            termios.tcflow(link.keeper, termios.TCOON)
        assert "queue_full" in json.dumps(s), s
        at_rest_in(rig.serve, "fault")
        check(rig, "queue full, drained")
        # The drives took the stop after the drain (not only what came before the stall).
        wait_for(lambda: all(len(rig.stream(j)) > taken[j] + 2 for j in rig.checked), "setpoints after the drain")
    finally:
        stop(rig)


def test_disable_during_a_faults_quick_stop(protocol, link, tmp_path):
    rig = start(protocol, link, tmp_path)
    try:
        mid_motion(rig.serve)
        rig.fault("b")
        stopping(rig.serve)
        assert rig.serve.request(cmd="disable")["ok"]
        # Power off at rest, in the fault; the state says disabled once it is cleared.
        wait_for(lambda: not rig.powered("a"), "a's power off")
        rig.serve.wait_for(lambda s: not s["moving"], "at rest")
        rig.recover("b")
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
        stopping(rig.serve)
        sigterm(rig)
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
        # An E-stop or a fault that comes once the drives are off changes nothing.
        if rig.estop:
            rig.press_estop("b")
            rig.serve.wait_for(lambda s: s["state"] in ("estop", "disabled") and not s["moving"], "at rest")
            rig.release_estop("b")
        else:
            rig.fault("b")
            rig.serve.wait_for(lambda s: s["state"] in ("fault", "disabled") and not s["moving"], "at rest")
            rig.recover("b")
        rig.serve.request(cmd="clear-fault")
        at_rest_in(rig.serve, "disabled")
        wait_for(lambda: not rig.powered("a"), "a's power off")
        settled(rig)
        taken = {j: len(rig.stream(j)) for j in rig.checked}
        # Nothing more reaches the drives: a window to see a wrong re-enable in, not a wait.
        time.sleep(0.5)
        assert rig.serve.status()["state"] == "disabled"
        assert not rig.powered("a"), "a powered again after the clear"
        assert {j: len(rig.stream(j)) for j in rig.checked} == taken
        check(rig, "disable, then E-stop or fault", cut_by_peer=("b",))
    finally:
        stop(rig)


def test_sigterm_then_a_fault(protocol, link, tmp_path):
    rig = start(protocol, link, tmp_path)
    try:
        mid_motion(rig.serve)
        rig.serve.proc.send_signal(signal.SIGTERM)
        # The fault a little into the shutdown's stop: the pace of the scenario, not a wait (on a
        # loaded machine it lands sooner or later in the stop; each is this scenario).
        time.sleep(0.03)
        rig.fault("b")
        rc = rig.serve.proc.wait(15)
        assert rc == 0, f"{rig.name}: exit {rc}: {rig.serve.log.read_text()}"
        check(rig, "SIGTERM, then fault", cut_by_peer=("b",))
    finally:
        stop(rig)
