"""Feetech STS/SCS servos on the far end of motiond's serial link, built on Feetech's own Python
SDK (PyPI `feetech-servo-sdk`, the one LeRobot uses): every instruction packet's checksum is
checked by recomputing it with the SDK's `txPacket`, words and signs are decoded with its
`SCS_MAKEWORD`/`SCS_TOHOST` in the series' byte order (`SCS_SETEND`), and every status packet is
built by its `txPacket`. The servo model: a control table of the registers motiond uses (Torque
Enable, Acceleration, Goal Position, Lock, Present Position, Status, Return Delay, the position
limits, Homing Offset and the registers LeRobot sets on connect, at LeRobot's addresses), Ping, Read, Write, Sync Write, Sync Read (STS only: an SCS servo does
not know it), the status byte's and Status register's faults (a servo cuts its torque on
overload, as Feetech's protection does), and teach-in: with torque off a servo can be moved by
hand and still reports where it is. No communication watchdog: a servo keeps its last goal when
the host goes quiet.
"""

import threading
import time

import serial
import scservo_sdk.scservo_def as scs
from scservo_sdk.protocol_packet_handler import protocol_packet_handler

from harness import FrameLog, count_decoded, unwatch_behind, watch_behind

SDK = protocol_packet_handler()
PING, READ, WRITE, SYNC_READ, SYNC_WRITE = 0x01, 0x02, 0x03, 0x82, 0x83
ADDR = {"return_delay": 7, "min": 9, "max": 11, "max_torque": 16, "phase": 18, "p": 21, "d": 22,
        "i": 23, "protection_current": 28, "homing": 31, "mode": 33, "overload_torque": 36,
        "torque": 40, "acceleration": 41, "goal": 42, "present": 56, "status": 65,
        "max_acceleration": 85}
LOCK = {"sts": 55, "scs": 48}
FAULT = {"voltage": 1, "angle_sensor": 2, "overheat": 4, "overcurrent": 8, "angle": 16,
         "overload": 32}


class Capture:
    """A port for the SDK's txPacket: what it writes is kept (instruction checks) or sent on."""

    def __init__(self, sink=None):
        self.is_using = False
        self.sink = sink
        self.written = b""

    def clearPort(self):
        pass

    def writePort(self, packet):
        self.written = bytes(packet)
        if self.sink is not None:
            self.sink.write(self.written)
        return len(packet)


class Servo:
    def __init__(self, id_, series="sts", position=2048, calibration=None, deaf=()):
        self.id = id_
        # Addresses whose writes it ignores (a register its firmware lacks).
        self.deaf = set(deaf)
        self.series = series
        self.position = position
        # A LeRobot calibration's motor ({homing_offset, range_min, range_max}), which
        # `lerobot-calibrate` writes to the servo's registers.
        self.calibration = calibration
        self.table = bytearray(128)
        self.goals = []  # goal positions taken with torque on
        self.torque_writes = []
        self.stream = []  # goals taken with torque on, None where the torque went off

    def power_on(self):
        """The factory control table, in the byte order the SDK is set to (SCS_SETEND)."""
        self.table = bytearray(128)
        # Values other than LeRobot's (Return_Delay_Time as from the factory), so that what
        # motiond writes on connect shows.
        self.table[ADDR["return_delay"]] = 250
        self.set_word("max_torque", 1000)
        self.table[ADDR["phase"]] = 0x1C
        self.table[ADDR["p"]] = 32
        self.table[ADDR["d"]] = 32
        if self.series == "sts":
            self.set_word("protection_current", 500)
            self.table[ADDR["overload_torque"]] = 80
        self.set_word("min", 0)
        self.set_word("max", 4095 if self.series == "sts" else 1023)
        if self.calibration is not None:
            self.set_word("min", self.calibration["range_min"])
            self.set_word("max", self.calibration["range_max"])
            if self.series == "sts":  # sign-magnitude with bit 11, as LeRobot encodes it
                self.set_word("homing", self.calibration["homing_offset"], 11)
        self.set_word("present", self.position)
        self.set_word("goal", self.position)

    def word(self, name, signed_bit=None):
        a = ADDR[name]
        value = scs.SCS_MAKEWORD(self.table[a], self.table[a + 1])
        return scs.SCS_TOHOST(value, signed_bit) if signed_bit is not None else value

    def set_word(self, name, value, signed_bit=None):
        a = ADDR[name]
        if signed_bit is not None:
            value = scs.SCS_TOSCS(value, signed_bit)
        self.table[a], self.table[a + 1] = scs.SCS_LOBYTE(value), scs.SCS_HIBYTE(value)

    @property
    def sign_bit(self):
        return 15 if self.series == "sts" else None

    @property
    def torque(self):
        return self.table[ADDR["torque"]]

    @property
    def present(self):
        return self.word("present", self.sign_bit)

    @property
    def status(self):
        return self.table[ADDR["status"]]

    def error_byte(self):
        # The status byte carries the fault bits the SDK names (not the register's bit 4).
        return self.status & 0x2F


class Chain:
    """One half-duplex bus of servos of one series at `baud` on the peer end of `link`."""

    def __init__(self, link, servos, series="sts", baud=1_000_000):
        self.link = link
        self.series = series
        scs.SCS_SETEND(0 if series == "sts" else 1)
        self.servos = {s.id: s for s in servos}
        for s in servos:
            s.power_on()
        self.port = serial.Serial(str(link.peer), baud, timeout=0.002)
        self.errors = []
        self.packets = FrameLog()  # (instruction, id, params) as received
        self.lock = threading.Lock()
        self.running = True
        watch_behind(self.behind)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def behind(self):
        return self.port.is_open and self.port.in_waiting > 0

    def close(self):
        unwatch_behind(self.behind)
        self.running = False
        self.thread.join(2)
        self.port.close()
        count_decoded(f"feetech-{self.series}", len(self.packets.all()))

    # -- packets ----------------------------------------------------------------------------
    def run(self):
        buf = b""
        while self.running:
            try:
                buf += self.port.read(4096)
            except serial.SerialException:
                return
            while True:
                start = buf.find(b"\xff\xff")
                if start < 0:
                    buf = buf[-1:] if buf.endswith(b"\xff") else b""
                    break
                if start > 0:
                    self.errors.append(f"{start} bytes before a header: {buf[:start].hex()}")
                    buf = buf[start:]
                if len(buf) < 4:
                    break
                total = buf[3] + 4
                if len(buf) < total:
                    break
                packet, buf = buf[:total], buf[total:]
                self.handle(packet)

    def handle(self, packet):
        # The SDK's own checksum: rebuild the packet with txPacket and compare the last byte.
        check = Capture()
        SDK.txPacket(check, list(packet))
        if check.written[-1] != packet[-1]:
            self.errors.append(f"checksum {packet[-1]:#04x} != SDK's {check.written[-1]:#04x}: {packet.hex()}")
            return
        id_, instruction, params = packet[2], packet[4], bytes(packet[5:-1])
        self.packets.add((instruction, id_, params))
        with self.lock:
            if instruction == SYNC_WRITE:
                addr, size = params[0], params[1]
                for k in range(2, len(params), size + 1):
                    s = self.servos.get(params[k])
                    if s is not None:
                        self.write(s, addr, params[k + 1 : k + 1 + size])
            elif instruction == SYNC_READ:
                if self.series != "sts":
                    self.errors.append("Sync Read sent to SCS servos, which do not know it")
                    return
                addr, size = params[0], params[1]
                for i in params[2:]:
                    s = self.servos.get(i)
                    if s is not None:
                        self.reply(s, s.table[addr : addr + size])
            elif id_ in self.servos:
                s = self.servos[id_]
                if instruction == PING:
                    self.reply(s, b"")
                elif instruction == READ:
                    self.reply(s, s.table[params[0] : params[0] + params[1]])
                elif instruction == WRITE:
                    self.write(s, params[0], params[1:])
                    self.reply(s, b"")
                else:
                    self.errors.append(f"unexpected instruction {instruction:#04x}")
            elif id_ == scs.BROADCAST_ID and instruction == WRITE:
                for s in self.servos.values():
                    self.write(s, params[0], params[1:])

    def reply(self, servo, data):
        packet = [0xFF, 0xFF, servo.id, len(data) + 2, servo.error_byte(), *data, 0]
        SDK.txPacket(Capture(self.port), packet)

    def write(self, s, addr, data):
        for i, b in enumerate(data):
            if addr + i < ADDR["torque"] and s.table[LOCK[s.series]]:
                self.errors.append(f"servo {s.id}: EEPROM address {addr + i} written while locked")
                return
        if addr in s.deaf:
            return
        if addr == ADDR["torque"]:
            s.torque_writes.append(data[0])
            if data[0] and s.status & FAULT["overload"]:
                return  # an overloaded servo stays limp until its fault is cleared
            if s.torque and not data[0]:
                s.stream.append(None)
        s.table[addr : addr + len(data)] = data
        if addr == ADDR["goal"] and s.torque:
            goal = s.word("goal", s.sign_bit)
            s.set_word("present", goal, s.sign_bit)
            s.goals.append(goal)
            s.stream.append(goal)

    # -- the world acting on the servos ------------------------------------------------------
    def fault(self, id_, bits):
        """The servo detects `bits` (FAULT values): the status byte and Status register show them;
        overload cuts its torque."""
        with self.lock:
            s = self.servos[id_]
            s.table[ADDR["status"]] = bits
            if bits & FAULT["overload"] and s.torque:
                s.table[ADDR["torque"]] = 0
                s.stream.append(None)

    def clear(self, id_):
        with self.lock:
            self.servos[id_].table[ADDR["status"]] = 0

    def move_by_hand(self, id_, counts):
        """Someone moves a limp servo: it reports the new position; a stiff one does not move."""
        with self.lock:
            s = self.servos[id_]
            if s.torque:
                return False
            s.set_word("present", counts, s.sign_bit)
            return True
