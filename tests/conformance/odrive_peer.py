"""ODrive axes that speak CAN Simple through cantools and ODrive's own DBC files (shipped in the
odrive-can package: odrive-cansimple-0.5.6.dbc and -0.6.10.dbc), behind python-can's slcan on the
far end of motiond's serial link. Every frame motiond sends to an axis must decode with the DBC of
the axis's firmware, with exactly the DBC's length. The axis model: Clear_Errors, the axis
watchdog (armed over RxSdo on 0.6, or set "on the drive"), controller mode, closed loop,
setpoints, heartbeat and encoder estimates.
"""

import importlib.resources
import struct
import threading
import time

import can
import cantools

from harness import FrameLog, Slcan, count_decoded, unwatch_behind, watch_behind

IDLE, CLOSED_LOOP = 1, 8
WATCHDOG_TIMER_EXPIRED = 0x800
# Axis_Error ESTOP_REQUESTED per firmware, as in the DBC files' value tables.
ESTOP_REQUESTED = {"0.5": 0x4000, "0.6": 0x2000000}
# The endpoint ids this model gives the watchdog settings (a real firmware's come from its
# flat_endpoints.json).
ENDPOINT_WATCHDOG_TIMEOUT = 200
ENDPOINT_ENABLE_WATCHDOG = 201


def dbc(version: str):
    name = {"0.5": "odrive-cansimple-0.5.6.dbc", "0.6": "odrive-cansimple-0.6.10.dbc"}[version]
    path = importlib.resources.files("odrive_can") / "dbc" / name
    return cantools.database.load_string(path.read_text(), database_format="dbc")


class Axis:
    def __init__(self, node: int, position: float = 0.0):
        self.node = node
        self.state = IDLE
        self.error = 0
        self.position = position
        self.velocity = 0.0
        self.control_mode = None
        self.watchdog_timeout = None  # s; None: not armed
        self.watchdog_enabled = False
        self.fed_at = None
        self.watchdog_expired_at = None
        self.estop_input = False  # the axis's E-stop input: errors stay set while it is active
        self.setpoints = []  # Input_Pos (or Input_Vel) applied in closed loop
        self.commands = []  # (message name, signals) in order
        # (closed loop, message name, signals) of every setpoint message and axis state request.
        self.stream = []


class Bus:
    def __init__(self, link, nodes, firmware="0.6", estimate_period=0.004, watchdog_on_drive=None):
        self.link = link
        self.db = dbc(firmware)
        self.firmware = firmware
        self.axes = {n: Axis(n) for n in nodes}
        if watchdog_on_drive:
            for a in self.axes.values():
                a.watchdog_timeout, a.watchdog_enabled = watchdog_on_drive, True
        self.frames = FrameLog()
        self.errors = []
        self.estimate_period = estimate_period
        self.can = Slcan(link.peer)
        self.lock = threading.Lock()
        self.running = True
        watch_behind(self.behind)
        self.threads = [
            threading.Thread(target=self.receive, daemon=True),
            threading.Thread(target=self.report, daemon=True),
        ]
        for t in self.threads:
            t.start()

    def behind(self):
        return self.can.behind()

    def close(self):
        unwatch_behind(self.behind)
        self.running = False
        for t in self.threads:
            t.join(2)
        self.can.shutdown()
        count_decoded("odrive", sum(len(a.commands) for a in self.axes.values()))

    def send(self, name, **signals):
        m = self.db.get_message_by_name(name)
        self.can.send(can.Message(arbitration_id=m.frame_id, data=m.encode(signals), is_extended_id=False))

    def receive(self):
        while self.running:
            msg = self.can.recv(0.01)
            if msg is None:
                continue
            self.frames.add(msg)
            if msg.is_remote_frame:
                continue
            node, cmd = msg.arbitration_id >> 5, msg.arbitration_id & 0x1F
            axis = self.axes.get(node)
            if axis is None:
                continue
            try:
                m = self.db.get_message_by_frame_id(msg.arbitration_id)
                if len(msg.data) != m.length:
                    raise ValueError(f"{m.name}: DLC {len(msg.data)}, the DBC says {m.length}")
                signals = m.decode(bytes(msg.data), decode_choices=False)
            except Exception as e:  # noqa: BLE001 - every problem is a conformance failure
                self.errors.append(f"{msg}: {e}")
                continue
            with self.lock:
                self.apply(axis, m.name.split("_", 1)[1], signals, bytes(msg.data))

    def apply(self, axis, name, s, raw):
        axis.commands.append((name, s))
        if name in ("Set_Input_Pos", "Set_Input_Vel", "Set_Axis_State"):
            axis.stream.append((axis.state == CLOSED_LOOP, name, s))
        now = time.monotonic()
        if name == "Clear_Errors":
            axis.error = ESTOP_REQUESTED[self.firmware] if axis.estop_input else 0
            axis.watchdog_expired_at = None
        elif name == "RxSdo":
            if s["Opcode"] == 1:
                value = raw[4:8]
                if s["Endpoint_ID"] == ENDPOINT_WATCHDOG_TIMEOUT:
                    axis.watchdog_timeout = struct.unpack("<f", value)[0]
                elif s["Endpoint_ID"] == ENDPOINT_ENABLE_WATCHDOG:
                    axis.watchdog_enabled = bool(value[0])
                    axis.fed_at = now
        elif name == "Set_Controller_Mode":
            axis.control_mode = s["Control_Mode"]
        elif name == "Set_Axis_State":
            requested = s["Axis_Requested_State"]
            if requested == CLOSED_LOOP and axis.error == 0:
                axis.state = CLOSED_LOOP
                axis.fed_at = now
            elif requested == IDLE:
                axis.state = IDLE
        elif name == "Set_Input_Pos":
            axis.fed_at = now
            if axis.state == CLOSED_LOOP:
                axis.position = s["Input_Pos"]
                axis.setpoints.append(s["Input_Pos"])
        elif name == "Set_Input_Vel":
            axis.fed_at = now
            if axis.state == CLOSED_LOOP:
                axis.velocity = s["Input_Vel"]
                axis.setpoints.append(s["Input_Vel"])

    def report(self):
        """Encoder estimates every `estimate_period`, heartbeats every 100 ms; the watchdogs."""
        next_heartbeat = next_estimate = 0.0
        last = time.monotonic()
        while self.running:
            time.sleep(0.002)
            now = time.monotonic()
            dt, last = now - last, now
            with self.lock:
                for a in self.axes.values():
                    if (
                        a.watchdog_enabled
                        and a.watchdog_timeout
                        and a.state == CLOSED_LOOP
                        and a.fed_at is not None
                        and now - a.fed_at > a.watchdog_timeout
                        and not self.can.behind()  # this peer has caught up
                    ):
                        a.error |= WATCHDOG_TIMER_EXPIRED
                        a.state = IDLE
                        a.velocity = 0.0
                        # When the axis's timer ran out, not when this thread came by to see it
                        # (a drive's watchdog is a timer of its own; this model only polls).
                        a.watchdog_expired_at = a.fed_at + a.watchdog_timeout
                    if a.state == CLOSED_LOOP and a.control_mode == 2:
                        a.position += a.velocity * dt
                axes = [(a.node, a.position, a.velocity, a.error, a.state) for a in self.axes.values()]
            estimates = now >= next_estimate
            if estimates:
                next_estimate = now + self.estimate_period
            try:
                for node, pos, vel, error, state in axes:
                    if estimates:
                        self.send(f"Axis{node}_Get_Encoder_Estimates", Pos_Estimate=pos, Vel_Estimate=vel)
                    if now >= next_heartbeat:
                        hb = {"Axis_Error": error, "Axis_State": state, "Trajectory_Done_Flag": 0}
                        if self.firmware == "0.5":
                            hb.update(Motor_Error_Flag=0, Encoder_Error_Flag=0, Controller_Error_Flag=0)
                        else:
                            hb.update(Procedure_Result=0)
                        self.send(f"Axis{node}_Heartbeat", **hb)
                if now >= next_heartbeat:
                    next_heartbeat = now + 0.1
            except can.CanError:
                pass

    def press_estop(self, node):
        """The axis's E-stop: ESTOP_REQUESTED in its errors, idle."""
        with self.lock:
            a = self.axes[node]
            a.estop_input = True
            a.error |= ESTOP_REQUESTED[self.firmware]
            a.state = IDLE
            a.velocity = 0.0

    def release_estop(self, node):
        """Released: the error stays until Clear_Errors."""
        with self.lock:
            self.axes[node].estop_input = False

    def poll_from_another_host(self, node=20, cmd=0x18, count=20):
        """Another host on the bus asks an ODrive for data with remote requests (`r0298`)."""
        for _ in range(count):
            self.can.send(can.Message(arbitration_id=(node << 5) | cmd, is_remote_frame=True, dlc=8, is_extended_id=False))
            time.sleep(0.005)
