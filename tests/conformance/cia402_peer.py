"""CiA 402 drives built on the `canopen` stack: a LocalNode per drive with cia402.eds (SDO server,
NMT slave, heartbeat producer, EMCY producer), behind python-can's slcan driver on the far end of
motiond's serial link. The drive side of CSP is written here from CiA 402: on each SYNC the RPDO
is decoded with the mapping read back from the object dictionary, the power state machine steps,
the position follows the target, and the TPDO is encoded with its mapping. The heartbeat
consumer (0x1016) applies the abort connection option (0x6007) when motiond's heartbeat stops.
"""

import struct
import threading
import time

import can
import canopen
from canopen.sdo.exceptions import SdoAbortedError

from harness import HERE, FrameLog, Slcan, count_decoded, unwatch_behind, watch_behind

SW_FOLLOWS = 1 << 12
STATE_MASKS = {  # statusword values this drive reports per state
    "switch_on_disabled": 0x0250,
    "ready": 0x0231,
    "switched_on": 0x0233,
    "enabled": 0x0237 | SW_FOLLOWS,
    "quick_stop": 0x0217,
    "fault": 0x0218,
}
SIZES = {8: "<B", 16: "<H", 32: "<I"}
SIGNED = {(0x607A, 0), (0x6064, 0)}


class Log(can.Listener):
    def __init__(self, log: FrameLog):
        self.log = log

    def on_message_received(self, msg):
        self.log.add(msg)


class Drive:
    def __init__(self, network, node_id: int, position: int = 0):
        self.id = node_id
        self.node = canopen.LocalNode(node_id, str(HERE / "cia402.eds"))
        self.node.add_write_callback(self.on_write)
        self.node.add_read_callback(self.on_read)
        network.add_node(self.node)
        self.network = network
        self.lock = threading.Lock()
        self.state = "switch_on_disabled"
        self.position = position
        self.cw = 0
        self.prev_cw = 0
        self.target = position
        self.rpdo = None
        # (state, target) applied on each SYNC while operational.
        self.applied = []
        self.syncs = 0
        self.master_heartbeat_at = None
        self.connection_lost_at = None
        self.refuse = {}  # (index, sub) -> abort code
        self.mode_display = None  # what 0x6061 shows after 0x6060 is written (None: the same)
        self.sdo_writes = []
        self.cache = None
        # The drive's own quick-stop input (an E-stop wired to it): while active the drive is
        # in quick stop active whatever it is told.
        self.estop_input = False
        # Controlwords in the order the drive applied them, repeats left out.
        self.controlwords = []
        # Per SYNC while operational: (whether the drive followed with power, the target).
        self.stream = []

    # -- object dictionary --------------------------------------------------------------------
    def on_write(self, index, subindex, od, data):
        code = self.refuse.get((index, subindex))
        if code is not None:
            raise SdoAbortedError(code)
        self.sdo_writes.append((index, subindex, bytes(data)))
        self.cache = None  # the maps and ids are read back again on the next frame
        if index == 0x6060:
            shown = data if self.mode_display is None else bytes([self.mode_display])
            self.node.data_store.setdefault(0x6061, {})[0] = bytes(shown)

    def on_read(self, index, subindex, od):
        if index == 0x6041:
            return STATE_MASKS[self.state]
        if index == 0x6064:
            return self.position
        return None

    def mapping(self, index):
        """(object index, sub, bits) of each mapped object, read back from the dictionary."""
        count = self.node.sdo[index][0].raw
        out = []
        for sub in range(1, count + 1):
            v = self.node.sdo[index][sub].raw
            out.append((v >> 16, (v >> 8) & 0xFF, v & 0xFF))
        return out

    def cob(self, comm_index):
        """The PDO's COB-ID, or None while bit 31 disables it."""
        v = self.node.sdo[comm_index][1].raw
        return None if v & 0x8000_0000 else v & 0x7FF

    def config(self):
        """The PDO maps, COB-IDs and the consumer as the dictionary holds them now (read back
        after every SDO write; frames come far more often than writes)."""
        c = self.cache
        if c is None:
            c = self.cache = {
                "rpdo_cob": self.cob(0x1400),
                "tpdo_cob": self.cob(0x1800),
                "rpdo_map": self.mapping(0x1600),
                "tpdo_map": self.mapping(0x1A00),
                "consumer": self.node.sdo[0x1016][1].raw,
            }
        return c

    # -- bus ------------------------------------------------------------------------------------
    def on_frame(self, msg):
        if msg.is_remote_frame:
            return
        c = self.config()
        if msg.arbitration_id == 0x080:
            self.on_sync()
        elif msg.arbitration_id == c["rpdo_cob"]:
            with self.lock:
                self.rpdo = bytes(msg.data)
        elif (msg.arbitration_id & 0x780) == 0x700 and msg.data:
            if msg.arbitration_id - 0x700 == (c["consumer"] >> 16) & 0x7F:
                self.master_heartbeat_at = time.monotonic()

    def decode_rpdo(self, data):
        values, at = {}, 0
        for index, sub, bits in self.config()["rpdo_map"]:
            n = bits // 8
            fmt = SIZES[bits]
            if (index, sub) in SIGNED:
                fmt = fmt.lower()
            values[(index, sub)] = struct.unpack(fmt, data[at : at + n])[0]
            at += n
        if at != len(data):
            raise AssertionError(f"RPDO of {len(data)} bytes does not match its mapping ({at})")
        return values

    def encode_tpdo(self):
        out = b""
        for index, sub, bits in self.config()["tpdo_map"]:
            value = {0x6041: STATE_MASKS[self.state], 0x6064: self.position}[index]
            fmt = SIZES[bits]
            if (index, sub) in SIGNED:
                fmt = fmt.lower()
            out += struct.pack(fmt, value)
        return out

    def operational(self):
        return self.node.nmt.state == "OPERATIONAL"

    def on_sync(self):
        if not self.operational():
            return
        with self.lock:
            self.syncs += 1
            if self.rpdo is not None:
                v = self.decode_rpdo(self.rpdo)
                self.cw = v.get((0x6040, 0), self.cw)
                self.target = v.get((0x607A, 0), self.target)
                if not self.controlwords or self.controlwords[-1] != self.cw:
                    self.controlwords.append(self.cw)
            self.step_state()
            powered = self.state == "enabled" and self.cw & 0x0F == 0x0F
            if powered:
                self.position = self.target
                self.applied.append(self.target)
            self.stream.append((powered, self.target))
            cob = self.config()["tpdo_cob"]
            data = self.encode_tpdo()
        if cob is not None:
            self.network.send_message(cob, data)

    def step_state(self):
        cw, rising_reset = self.cw, self.cw & 0x80 and not self.prev_cw & 0x80
        self.prev_cw = cw
        s = self.state
        if self.estop_input:
            self.state = "quick_stop"
            return
        if s == "fault":
            if rising_reset:
                self.state = "switch_on_disabled"
            return
        if s == "quick_stop":
            if cw & 0x02 == 0 or cw & 0x8F == 0x00:  # disable voltage leaves quick stop
                self.state = "switch_on_disabled"
            return
        if cw & 0x87 == 0x06:
            self.state = "ready"
        elif cw & 0x8F == 0x07 and s in ("ready", "switched_on", "enabled"):
            self.state = "switched_on"
        elif cw & 0x8F == 0x0F and s in ("switched_on", "enabled"):
            self.state = "enabled"
        elif cw & 0x82 == 0x00:
            self.state = "switch_on_disabled"

    # -- faults ---------------------------------------------------------------------------------
    def fault(self, code=0x2310, register=0x03):
        """The error's EMCY goes out as it occurs, before any statusword showing the fault (a
        SYNC between the two sent the fault's TPDO first, and motiond named the statusword's
        fault instead of the EMCY's code)."""
        with self.lock:
            self.node.emcy.send(code, register)
            self.state = "fault"

    def press_estop(self):
        """The drive's quick-stop input: quick stop active from the next SYNC on."""
        with self.lock:
            self.estop_input = True
            self.state = "quick_stop"

    def release_estop(self):
        """Input released: the drive stays in quick stop active until told to disable voltage."""
        with self.lock:
            self.estop_input = False

    def warn(self, code=0x4210, register=0x08):
        self.node.emcy.send(code, register)

    def pending(self):
        return self.network.bus.behind()

    def stop_heartbeat(self):
        self.node.nmt.stop_heartbeat()

    def check_consumer(self):
        """The heartbeat consumer: motiond's heartbeat missing for the consumer time → 0x6007."""
        consumer = self.config()["consumer"]
        time_ms = consumer & 0xFFFF
        if not time_ms or self.master_heartbeat_at is None or self.connection_lost_at:
            return
        # Silence is real only when nothing waits unread on the line (this peer may stall).
        if self.pending() or time.monotonic() - self.master_heartbeat_at <= time_ms / 1000.0:
            return
        # When the consumer time ran out, not when this thread came by to see it.
        self.connection_lost_at = self.master_heartbeat_at + time_ms / 1000.0
        action = self.node.sdo[0x6007].raw
        with self.lock:
            if action == 3:
                self.state = "quick_stop"
            elif action == 2:
                self.state = "switch_on_disabled"
            else:
                self.state = "fault"
        # EMCY 0x8130: heartbeat (life guard) error.
        self.node.emcy.send(0x8130, 0x11)


class Bus:
    """The far end: python-can's slcan driver, canopen's network, the drives."""

    def __init__(self, link, node_ids, bitrate=1_000_000):
        self.link = link
        self.frames = FrameLog()
        self.can = Slcan(link.peer, bitrate)
        self.network = canopen.Network(self.can)
        self.drives = {n: Drive(self.network, n) for n in node_ids}
        self.network.listeners.append(Log(self.frames))
        self.network.listeners.append(Dispatch(self))
        self.network.connect()
        self.running = True
        watch_behind(self.behind)
        self.watch = threading.Thread(target=self.watchdogs, daemon=True)
        self.watch.start()

    def watchdogs(self):
        while self.running:
            for d in self.drives.values():
                d.check_consumer()
            time.sleep(0.001)

    def behind(self):
        return self.can.behind()

    def close(self):
        unwatch_behind(self.behind)
        self.running = False
        self.watch.join(2)
        for d in self.drives.values():
            d.stop_heartbeat()
        self.network.disconnect()
        count_decoded("cia402", len(self.frames.all()))

    def received(self):
        return [m for _, m in self.frames.all()]


class Dispatch(can.Listener):
    def __init__(self, bus):
        self.bus = bus

    def on_message_received(self, msg):
        for d in self.bus.drives.values():
            d.on_frame(msg)


class MitEcho:
    """Answers MIT motor 9 (the velocity joint) so the bus enables; not under test here."""

    def __init__(self, bus):
        self.bus = bus

        state = {"p": bytes([0x7F, 0xFF])}  # position 0 in the Mini Cheetah range

        class Echo(can.Listener):
            def on_message_received(_, msg):
                if msg.arbitration_id == 9 and len(msg.data) == 8:
                    d = bytes(msg.data)
                    if d[:7] != b"\xff" * 7:  # a command, not enter/exit/zero
                        state["p"] = d[:2]
                    p = state["p"]
                    bus.network.send_message(0, bytes([9, p[0], p[1], 0x7F, 0xF7, 0xFF]))

        self.listener = Echo()
        bus.network.notifier.add_listener(self.listener)

    def stop(self):
        self.bus.network.notifier.remove_listener(self.listener)
