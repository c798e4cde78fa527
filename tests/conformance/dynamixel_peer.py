"""DYNAMIXEL X-series servos on the far end of motiond's serial link. Every instruction packet is
checked with ROBOTIS's dynamixel-sdk: its CRC (`updateCRC`) and its byte unstuffing
(`removeStuffing`); every status packet is built with its stuffing (`addStuffing`) and CRC. The
servo model: the control table motiond uses (Operating Mode in EEPROM, Torque Enable, Hardware
Error Status, Bus Watchdog, Goal Velocity/Position, Present Position), Sync Write, Sync Read,
Reboot, the hardware error alert and the Bus Watchdog's stop; Sync Reads within the EEPROM area
(addresses 0..63) answer from the servo's calibration registers there (Drive_Mode, Homing_Offset,
the position limits), laid out as the X series' control table (LeRobot's `tables.py`). Read and
Write of one servo (what motiond's set-up at open sends) reach its whole control table; a Write
to the EEPROM area with torque on is refused with the access error, as the servos do, and noted.
Return_Delay_Time starts at 0 (a servo LeRobot set up), the position gains at the XL430's
factory values.
"""

import threading
import time

import serial
from dynamixel_sdk.protocol2_packet_handler import Protocol2PacketHandler

from harness import FrameLog, count_decoded, unwatch_behind, watch_behind

SDK = Protocol2PacketHandler()
HEADER = bytes([0xFF, 0xFF, 0xFD, 0x00])
SYNC_WRITE, SYNC_READ, REBOOT, STATUS, WRITE, READ = 0x83, 0x82, 0x08, 0x55, 0x03, 0x02
TABLE_LEN = 147
ACCESS_ERROR = 0x07
ADDR = {"mode": 11, "torque": 64, "hw_error": 70, "watchdog": 98, "goal_vel": 104, "goal_pos": 116, "present_pos": 132}
EEPROM_END = 64
ALERT = 0x80
# Goal Velocity unit: 0.229 rev/min.
VEL_UNIT_RAD_S = 0.229 * 2 * 3.141592653589793 / 60


def s32(b):
    return int.from_bytes(b, "little", signed=True)


class Servo:
    def __init__(self, id_, position=2048, mode=3, drive_mode=0, homing_offset=0, limits=(0, 4095)):
        self.id = id_
        self.mode = mode
        # The calibration registers `lerobot-calibrate` writes (EEPROM).
        self.drive_mode = drive_mode
        self.homing_offset = homing_offset
        self.limits = limits
        self.mode_writes = 0
        self.torque = 0
        self.hw_error = 0
        self.watchdog = 0  # 20 ms units; -1 when it expired
        self.goal_pos = position
        self.goal_vel = 0
        self.present = position
        self.goals = []  # goal positions (or velocities) applied with torque on
        self.watchdog_expired_at = None
        self.watchdog_expired_after = None  # the Bus Watchdog value (20 ms units) that ran out
        self.reboots = 0
        self.velocity_when_stopped = None
        # (torque on and following, "pos" | "vel", value) of every goal and torque write.
        self.stream = []
        # The rest of the control table, as single Writes leave it.
        self.other = bytearray(TABLE_LEN)
        self.other[84:86] = (800).to_bytes(2, "little")  # Position_P_Gain (XL430 factory)
        # (address, data) of every single Write taken.
        self.writes = []

    def eeprom(self):
        """Addresses 0..63 of the X series' control table, as far as this servo keeps them."""
        t = bytearray(self.other[:EEPROM_END])
        t[10], t[11] = self.drive_mode, self.mode
        t[20:24] = self.homing_offset.to_bytes(4, "little", signed=True)
        t[24:28] = (10).to_bytes(4, "little")  # Moving_Threshold (default)
        t[44:48] = (445).to_bytes(4, "little")  # Velocity_Limit (XL430 default)
        t[48:52] = self.limits[1].to_bytes(4, "little")
        t[52:56] = self.limits[0].to_bytes(4, "little")
        return bytes(t)

    def table(self):
        """The whole control table as a Read sees it."""
        t = bytearray(self.eeprom()) + self.other[EEPROM_END:]
        t[ADDR["torque"]] = self.torque
        t[ADDR["hw_error"]] = self.hw_error
        t[ADDR["watchdog"]] = max(self.watchdog, 0)
        t[116:120] = self.goal_pos.to_bytes(4, "little", signed=True)
        t[132:136] = self.present.to_bytes(4, "little", signed=True)
        return bytes(t)


class Chain:
    def __init__(self, link, servos):
        self.link = link
        self.servos = {s.id: s for s in servos}
        self.port = serial.Serial(str(link.peer), 4_000_000, timeout=0.002)
        self.errors = []
        self.packets = FrameLog()  # (instruction, id, params) as received
        self.last_packet_at = None
        self.lock = threading.Lock()
        self.running = True
        watch_behind(self.behind)
        self.threads = [threading.Thread(target=self.run, daemon=True), threading.Thread(target=self.tick, daemon=True)]
        for t in self.threads:
            t.start()

    def behind(self):
        return self.port.is_open and self.port.in_waiting > 0

    def close(self):
        unwatch_behind(self.behind)
        self.running = False
        for t in self.threads:
            t.join(2)
        self.port.close()
        count_decoded("dynamixel", len(self.packets.all()))

    # -- packets ----------------------------------------------------------------------------
    def run(self):
        buf = b""
        while self.running:
            try:
                buf += self.port.read(4096)
            except serial.SerialException:
                return
            while True:
                start = buf.find(HEADER)
                if start < 0:
                    buf = buf[-3:]
                    break
                if start > 0:
                    self.errors.append(f"{start} bytes before a header: {buf[:start].hex()}")
                    buf = buf[start:]
                if len(buf) < 7:
                    break
                length = buf[5] | buf[6] << 8
                if len(buf) < 7 + length:
                    break
                packet, buf = buf[: 7 + length], buf[7 + length :]
                self.handle(list(packet))

    def handle(self, packet):
        crc = SDK.updateCRC(0, packet, len(packet) - 2)
        if crc != (packet[-2] | packet[-1] << 8):
            self.errors.append(f"CRC {crc:#06x} does not match packet {bytes(packet).hex()}")
            return
        packet = SDK.removeStuffing(packet)
        length = packet[5] | packet[6] << 8
        id_, instruction = packet[4], packet[7]
        params = bytes(packet[8 : 8 + length - 3])
        self.packets.add((instruction, id_, params))
        with self.lock:
            self.last_packet_at = time.monotonic()
            if instruction == SYNC_WRITE:
                self.sync_write(params)
            elif instruction == SYNC_READ:
                self.sync_read(params)
            elif instruction == REBOOT and id_ in self.servos:
                s = self.servos[id_]
                self.reply(s, b"")
                s.reboots += 1
                s.hw_error, s.torque, s.watchdog = 0, 0, 0
                s.stream.append((False, "torque", 0))
                s.goal_vel = 0
            elif instruction == WRITE and id_ in self.servos:
                self.write_one(self.servos[id_], params[0] | params[1] << 8, params[2:])
            elif instruction == READ and id_ in self.servos:
                s = self.servos[id_]
                addr, size = params[0] | params[1] << 8, params[2] | params[3] << 8
                self.reply(s, s.table()[addr : addr + size])

    def write_one(self, s, addr, data):
        if addr < EEPROM_END and s.torque:
            self.errors.append(f"servo {s.id}: EEPROM address {addr} written with torque on")
            self.reply(s, b"", error=ACCESS_ERROR)
            return
        s.writes.append((addr, bytes(data)))
        if addr in ADDR.values():
            self.write(s, addr, data)
        else:
            s.other[addr : addr + len(data)] = data
        self.reply(s, b"")

    def reply(self, servo, data, error=0):
        error |= ALERT if servo.hw_error else 0
        params = [error, *data]
        length = len(params) + 3
        packet = [0xFF, 0xFF, 0xFD, 0x00, servo.id, length & 0xFF, length >> 8, STATUS, *params, 0, 0]
        packet = SDK.addStuffing(packet)
        total = (packet[5] | packet[6] << 8) + 7
        crc = SDK.updateCRC(0, packet, total - 2)
        packet[total - 2], packet[total - 1] = crc & 0xFF, crc >> 8
        self.port.write(bytes(packet[:total]))

    def sync_write(self, p):
        addr, size = p[0] | p[1] << 8, p[2] | p[3] << 8
        for k in range(4, len(p), size + 1):
            s = self.servos.get(p[k])
            if s is None:
                continue
            data = p[k + 1 : k + 1 + size]
            self.write(s, addr, data)

    def write(self, s, addr, data):
        if addr == ADDR["mode"]:
            if s.torque:
                self.errors.append(f"servo {s.id}: Operating Mode written with torque on")
            s.mode = data[0]
            s.mode_writes += 1
        elif addr == ADDR["torque"]:
            if data[0] and s.hw_error:
                return  # a servo in alert refuses torque
            s.torque = data[0]
            s.stream.append((False, "torque", s.torque))
        elif addr == ADDR["watchdog"]:
            s.watchdog = data[0]
        elif addr == ADDR["goal_pos"]:
            if s.watchdog == -1:
                return  # refused until the watchdog is cleared
            s.goal_pos = s32(data)
            if s.torque and s.mode in (3, 4):
                s.present = s.goal_pos
                s.goals.append(s.goal_pos)
            s.stream.append((bool(s.torque) and s.mode in (3, 4), "pos", s.goal_pos))
        elif addr == ADDR["goal_vel"]:
            if s.watchdog == -1:
                return
            s.goal_vel = s32(data)
            if s.torque and s.mode == 1:
                s.goals.append(s.goal_vel)
            s.stream.append((bool(s.torque) and s.mode == 1, "vel", s.goal_vel))

    def sync_read(self, p):
        addr, size = p[0] | p[1] << 8, p[2] | p[3] << 8
        for id_ in p[4:]:
            s = self.servos.get(id_)
            if s is None:
                continue
            if addr == ADDR["present_pos"] and size == 4:
                self.reply(s, s.present.to_bytes(4, "little", signed=True))
            elif addr == ADDR["mode"] and size == 1:
                self.reply(s, bytes([s.mode]))
            elif addr + size <= EEPROM_END:
                self.reply(s, s.eeprom()[addr : addr + size])
            else:
                self.errors.append(f"unexpected Sync Read of {size} bytes at {addr}")

    # -- the servos' own time ----------------------------------------------------------------
    def tick(self):
        """Velocity servos move; the Bus Watchdog stops a servo that hears nothing."""
        dt = 0.002
        while self.running:
            now = time.monotonic()
            with self.lock:
                for s in self.servos.values():
                    if s.torque and s.mode == 1 and s.watchdog != -1:
                        s.present += round(s.goal_vel * VEL_UNIT_RAD_S * 4096 / (2 * 3.141592653589793) * dt)
                    if (
                        s.torque
                        and s.watchdog > 0
                        and self.last_packet_at is not None
                        and now - self.last_packet_at > s.watchdog * 0.020
                        and not self.port.in_waiting  # this peer is not behind
                    ):
                        s.velocity_when_stopped = s.goal_vel
                        # When the servo's timer ran out, not when this thread came by to see it.
                        s.watchdog_expired_at = self.last_packet_at + s.watchdog * 0.020
                        s.watchdog_expired_after = s.watchdog
                        s.watchdog = -1
                        s.goal_vel = 0
            time.sleep(dt)

    def alert(self, id_, error=0x20):
        """A hardware error (e.g. overload): status packets carry the alert bit from now on."""
        with self.lock:
            self.servos[id_].hw_error = error
            self.servos[id_].torque = 0
            self.servos[id_].stream.append((False, "torque", 0))
