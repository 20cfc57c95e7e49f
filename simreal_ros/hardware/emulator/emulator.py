"""The virtual servo bus: the device side of Dynamixel Protocol 2.0 on a pseudo-terminal.

``simreal emulate`` runs :class:`BusEmulator`: it opens a pty, makes ``link`` a symlink to its
slave side (what a driver opens like ``/dev/ttyUSB0``), prints ``ready <link>`` and serves
until SIGINT/SIGTERM. One event loop does three things:

* physics: :class:`~simreal_ros.hardware.emulator.reality.VirtualArm` advanced in real time
  (1 kHz);
* protocol: bytes from the host go through
  :class:`~simreal_ros.hardware.dynamixel.protocol.PacketParser`; each instruction is answered
  by every addressed servo in order, each status packet written when it would have finished on
  the wire: the request's bytes at 10 bits/byte at the baud rate, then the servo's Return Delay
  Time (register 9, 2 us units), then its own bytes. A servo only hears the host when the
  host's baud rate (termios of the pty) equals its own
  (register 8), as on a real bus;
* faults (``--faults``): ``crc=P`` corrupts a status packet with probability P, ``timeout=P``
  drops all answers to a request with probability P, ``late=P`` sends all answers to a request
  ``late_s`` (default 0.03 s) late with probability P, without holding up the answers to later
  requests (so they reach the host after its timeout, in the middle of a later transaction, as
  answers stuck in an adapter's buffer do), ``unplug_at=T``/``replug_at=T`` (seconds after
  ready) remove the pty and the link and bring a new one back, as when a USB adapter is pulled
  and plugged in again; ``seed=N`` seeds the fault draws; ``eeprom_drop=ID``: servo ID
  acknowledges every EEPROM write but does not keep it (reads back the old value);
* trace (``--trace FILE``): one line per SYNC READ answered, ``sync_read ADDR LEN TIME_NS``
  then ``ID:HEX`` per servo with the data as read from the registers (before any fault), so a
  test can compare what the host published with what the servos really measured; ``TIME_NS``
  is when the arm was in the state read (the physics time of the sample, on the clock of ROS
  stamps), so a driver's ``joint_states`` stamp can be compared with it (pipeline latency,
  :mod:`simreal_ros.sysid.pipeline`); and one line per
  SYNC WRITE received, ``sync_write ADDR LEN TIME_NS`` (``time.time_ns()`` on arrival, the
  clock of ROS stamps) then ``ID:HEX`` per servo, so a benchmark can time a goal from its
  source to the bus.

Answers follow the e-Manual: a bad CRC to one servo gets a CRC error status, an unknown
instruction an Instruction Error, a bad address an Access Error, a short parameter block a
Data Length Error, a value outside a limit a Data Limit Error; broadcast instructions that
expect no answer are never answered; FACTORY RESET, CLEAR and the fast sync/bulk reads are
refused (Instruction Error to a single ID, silence on broadcast); REBOOT clears hardware errors
and turns torque off. Status Return Level (register 68) is honoured.

Bus Watchdog (register 98, 20 ms units, 0 = off): a servo with torque on that has heard no
valid instruction packet for it (its ID or broadcast) for longer than that expires: Bus
Watchdog reads -1, the servo stops and holds where its profile had got to (torque stays on,
Goal Position keeps the last goal), and it refuses goal writes (Data Range Error) until Bus
Watchdog is written 0 (:meth:`VirtualArm.expire_watchdog`). It is checked only when no bytes
from the host are waiting, so an emulator starved of CPU never expires a servo that was in
fact being talked to. Each expiry prints ``bus watchdog expired: servo IDs [...]``.

The event loop is the emulator's timing-critical thread: ``--rt-priority`` / ``--cpu-affinity``
put it under SCHED_FIFO (a real servo is hardware of its own that the host never preempts, so
``realtime:=true`` gives the emulator the highest priority of the graph, docs/realtime.md).
"""

from __future__ import annotations

from dataclasses import dataclass
import heapq
import math
import os
from pathlib import Path
import select
import signal
import sys
import termios
import time
from typing import Any, Callable

import numpy as np

from simreal_ros.core.validate import key_numbers
from simreal_ros.errors import ConfigError, SimrealError
from simreal_ros.hardware.dynamixel import control_table as ct
from simreal_ros.hardware.dynamixel import protocol as p
from simreal_ros.hardware.emulator.pty import Device, close_pty_link, open_pty_link
from simreal_ros.hardware.emulator.reality import VirtualArm

MAX_CATCH_UP_STEPS = 50

_TERMIOS_BAUD = {getattr(termios, f'B{b}'): b for b in
                 (9600, 19200, 38400, 57600, 115200, 230400, 460800, 500000, 576000, 921600,
                  1000000, 1152000, 2000000, 2500000, 3000000, 3500000, 4000000)
                 if hasattr(termios, f'B{b}')}


@dataclass(frozen=True)
class Faults:
    """Fault injection settings of the emulator."""

    crc: float = 0.0
    timeout: float = 0.0
    unplug_at: float | None = None
    replug_at: float | None = None
    seed: int = 0
    late: float = 0.0
    late_s: float = 0.03
    eeprom_drop: int = 0  # servo ID that does not keep EEPROM writes (0 = none)

    @classmethod
    def parse(cls, text: str) -> 'Faults':
        """Parse ``crc=0.01,timeout=0.005,late=0.01,late_s=0.03,unplug_at=5,seed=1`` etc."""
        src = '--faults'
        known = ('crc', 'timeout', 'late', 'late_s', 'unplug_at', 'replug_at', 'seed',
                 'eeprom_drop')
        values = key_numbers(text.split(','), known, src)
        for key in ('crc', 'timeout', 'late'):
            if not 0.0 <= values.get(key, 0.0) <= 1.0:
                raise ConfigError(src, key, 'a probability in [0, 1]', values[key])
        if not 0.0 < values.get('late_s', 0.03) <= 10.0:
            raise ConfigError(src, 'late_s', 'a delay in (0, 10] s', values['late_s'])
        unplug, replug = values.get('unplug_at'), values.get('replug_at')
        if unplug is not None and unplug < 0:
            raise ConfigError(src, 'unplug_at', 'a time >= 0 (s after ready)', unplug)
        if replug is not None and (unplug is None or replug <= unplug):
            raise ConfigError(src, 'replug_at', 'a time after unplug_at', replug)
        drop = values.get('eeprom_drop', 0)
        if drop != int(drop) or not 0 <= drop <= 252:
            raise ConfigError(src, 'eeprom_drop', 'a servo ID (1-252)', drop)
        return cls(values.get('crc', 0.0), values.get('timeout', 0.0), unplug, replug,
                   int(values.get('seed', 0)), values.get('late', 0.0),
                   values.get('late_s', 0.03), int(drop))


class BusEmulator:
    """A pty that answers like a bus of Dynamixel X-series servos (each its model) on an arm."""

    def __init__(self, arm: VirtualArm, link: str | Path, baud: int = 1_000_000,
                 faults: Faults | None = None,
                 echo: Callable[[str], None] | None = None,
                 trace: Callable[[str], None] | None = None) -> None:
        code = {v: k for k, v in ct.BAUD_RATES.items()}.get(baud)
        if code is None:
            raise ConfigError('--baud', 'baud', f'one of the X-series rates '
                              f'{sorted(ct.BAUD_RATES.values())}', baud)
        self.arm = arm
        self.link = Path(link)
        self.baud = baud
        for reg in arm.servos:
            reg.set('baud_rate', code)
        self.faults = faults or Faults()
        self.rng = np.random.default_rng(self.faults.seed)
        self.echo = echo or (lambda line: print(line, flush=True))
        self.trace = trace
        self.parser = p.PacketParser()
        self.master: int | None = None
        self.slave: int | None = None
        self.running = True
        self.bus_free = 0.0
        self._out: list[tuple[float, int, bytes]] = []
        self._seq = 0
        self._registered: dict[int, tuple[int, bytes]] = {}
        #: monotonic time each servo (by index) last heard a valid instruction packet for it
        self.heard = [time.monotonic()] * arm.n
        #: other devices of the robot on ports of their own (the IMU), plugged by serve
        self.devices: list[Device] = []
        # the clock of the physics: state after step k is at wall0 + (k - steps0) dt (serve
        # sets both; steps0 moves when the physics slips), in time.time_ns() (ROS stamps)
        self._wall0_ns = time.time_ns()
        self._steps0 = arm.step_count
        self.stats = {'packets': 0, 'rejected_crc': 0, 'rejected_length': 0,
                      'answers': 0, 'corrupted': 0, 'dropped': 0, 'late': 0}

    # ---- the port -----------------------------------------------------------------------------
    def plug(self) -> None:
        """Open a new pty and point the link at it."""
        self.master, self.slave = open_pty_link(self.link)
        self.parser.clear()
        self._out.clear()

    def unplug(self) -> None:
        """Remove the link and close the pty (the driver's fd gets EIO/hang-up)."""
        close_pty_link(self.link, self.master, self.slave)
        self.master = self.slave = None
        self._out.clear()

    def host_baud(self) -> int:
        """Return the baud rate the host set on its end of the pty."""
        assert self.master is not None
        try:
            speed = termios.tcgetattr(self.master)[5]
        except termios.error:
            return self.baud
        return _TERMIOS_BAUD.get(speed, 0)

    # ---- protocol -----------------------------------------------------------------------------
    def byte_time(self) -> float:
        """Seconds per byte on the wire (8N1: 10 bits)."""
        return 10.0 / self.baud

    def _servo_baud(self, i: int) -> int:
        return ct.BAUD_RATES.get(self.arm.servos[i].get('baud_rate'), 0)

    def _ids(self, packet_id: int) -> list[int]:
        if packet_id == p.BROADCAST_ID:
            return sorted(self.arm.by_id)
        return [packet_id] if packet_id in self.arm.by_id else []

    def handle(self, item: p.Packet | p.Rejected, now: float) -> list[tuple[int, bytes]]:
        """Process one packet; return the answers [(servo id, status packet), ...] in order."""
        arm = self.arm
        if isinstance(item, p.Rejected):
            self.stats['rejected_' + item.reason] += 1
            if item.reason == 'crc' and item.packet_id in arm.by_id:
                return [(item.packet_id, p.status(item.packet_id, p.ERR_CRC))]
            return []
        self.stats['packets'] += 1
        inst, pid, prm = item.instruction, item.packet_id, item.params
        broadcast = pid == p.BROADCAST_ID
        if inst == p.INST_STATUS:
            return []
        for sid in self._ids(pid):
            self.heard[arm.by_id[sid]] = now
        arm.update_present()
        out: list[tuple[int, bytes]] = []

        def answer(sid: int, err: int, data: bytes = b'') -> None:
            i = arm.by_id[sid]
            level = arm.servos[i].get('status_return_level')
            if inst != p.INST_PING and (level == 0 or (level == 1 and inst not in (
                    p.INST_READ, p.INST_SYNC_READ, p.INST_BULK_READ))):
                return
            reg = arm.servos[i]
            alert = p.ERR_ALERT if reg.get('hardware_error_status') else 0
            out.append((sid, p.status(sid, err | alert, data)))

        if inst == p.INST_PING:
            for sid in self._ids(pid):
                reg = arm.servos[arm.by_id[sid]]
                answer(sid, 0, p.u16(reg.get('model_number'))
                       + bytes([reg.get('firmware_version')]))
            return out
        if inst in (p.INST_SYNC_READ, p.INST_SYNC_WRITE, p.INST_BULK_READ, p.INST_BULK_WRITE):
            if broadcast:
                return self._group(inst, prm, answer, out)
            return self._single_error(pid, p.ERR_INSTRUCTION, answer, out)
        if inst in (p.INST_FACTORY_RESET, p.INST_CLEAR, p.INST_BACKUP, p.INST_FAST_SYNC_READ,
                    p.INST_FAST_BULK_READ) or inst not in (
                p.INST_READ, p.INST_WRITE, p.INST_REG_WRITE, p.INST_ACTION, p.INST_REBOOT):
            return self._single_error(pid, p.ERR_INSTRUCTION, answer, out)
        for sid in self._ids(pid):
            i = arm.by_id[sid]
            reg = arm.servos[i]
            if inst == p.INST_READ:
                if broadcast:
                    break
                if len(prm) != 4:
                    answer(sid, p.ERR_DATA_LENGTH)
                    continue
                addr, length = int.from_bytes(prm[0:2], 'little'), int.from_bytes(prm[2:4],
                                                                                  'little')
                err, data = reg.read(addr, length)
                answer(sid, err, data)
            elif inst in (p.INST_WRITE, p.INST_REG_WRITE):
                if len(prm) < 3:
                    if not broadcast:
                        answer(sid, p.ERR_DATA_LENGTH)
                    continue
                addr = int.from_bytes(prm[0:2], 'little')
                err, items = reg.check_write(addr, prm[2:])
                if not err:
                    if inst == p.INST_WRITE:
                        err = arm.write(i, items)
                    else:
                        self._registered[sid] = (addr, bytes(prm[2:]))
                        reg.set('registered_instruction', 1)
                if not broadcast:
                    answer(sid, err)
            elif inst == p.INST_ACTION:
                pending = self._registered.pop(sid, None)
                reg.set('registered_instruction', 0)
                if pending is not None:
                    err, items = reg.check_write(*pending)
                    if not err:
                        arm.write(i, items)
            elif inst == p.INST_REBOOT:
                arm.reboot(i)
                if not broadcast:
                    answer(sid, 0)
        return out

    def _single_error(self, pid: int, err: int, answer: Callable[..., None],
                      out: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
        if pid != p.BROADCAST_ID and pid in self.arm.by_id:
            answer(pid, err)
        return out

    def _group(self, inst: int, prm: bytes, answer: Callable[..., None],
               out: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
        arm = self.arm
        if inst in (p.INST_SYNC_READ, p.INST_SYNC_WRITE):
            if len(prm) < 4:
                return out
            addr = int.from_bytes(prm[0:2], 'little')
            length = int.from_bytes(prm[2:4], 'little')
            rest = prm[4:]
            if inst == p.INST_SYNC_READ:
                line = [f'sync_read {addr} {length} {self.state_time_ns()}'] \
                    if self.trace is not None else None
                for sid in rest:
                    if sid in arm.by_id:
                        err, data = arm.servos[arm.by_id[sid]].read(addr, length)
                        answer(sid, err, data)
                        if line is not None:
                            line.append(f'{sid}:{data.hex()}')
                if self.trace is not None and line is not None:  # (both: for the type checker)
                    self.trace(' '.join(line))
            else:
                stride = 1 + length
                if length == 0 or len(rest) % stride:
                    return out
                if self.trace is not None:  # when the goal reached the bus (bench teleop)
                    self.trace(' '.join([f'sync_write {addr} {length} {time.time_ns()}'] + [
                        f'{rest[k]}:{rest[k + 1:k + stride].hex()}'
                        for k in range(0, len(rest), stride)]))
                for k in range(0, len(rest), stride):
                    sid = rest[k]
                    if sid in arm.by_id:
                        i = arm.by_id[sid]
                        err, items = arm.servos[i].check_write(addr, rest[k + 1:k + stride])
                        if not err:
                            arm.write(i, items)
            return out
        k = 0
        while k + 5 <= len(prm):
            sid = prm[k]
            addr = int.from_bytes(prm[k + 1:k + 3], 'little')
            length = int.from_bytes(prm[k + 3:k + 5], 'little')
            k += 5
            if inst == p.INST_BULK_READ:
                if sid in arm.by_id:
                    err, data = arm.servos[arm.by_id[sid]].read(addr, length)
                    answer(sid, err, data)
            else:
                data = prm[k:k + length]
                k += length
                if len(data) == length and sid in arm.by_id:
                    i = arm.by_id[sid]
                    err, items = arm.servos[i].check_write(addr, data)
                    if not err:
                        arm.write(i, items)
        return out

    def _schedule(self, request_len: int, answers: list[tuple[int, bytes]], now: float) -> None:
        bt = self.byte_time()
        t = max(now, self.bus_free) + request_len * bt
        if answers and self.rng.random() < self.faults.timeout:
            self.stats['dropped'] += 1
            self.bus_free = t
            return
        # drawn only when asked for, so the other faults' draws of a seed stay as they were
        if answers and self.faults.late and self.rng.random() < self.faults.late:
            self.stats['late'] += 1
            self.bus_free = t  # the bus is free for the next request at once
            t += self.faults.late_s
            for _sid, pkt in answers:
                t += len(pkt) * bt
                self._seq += 1
                heapq.heappush(self._out, (t, self._seq, pkt))
                self.stats['answers'] += 1
            return
        for sid, pkt in answers:
            reg = self.arm.servos[self.arm.by_id[sid]]
            t += reg.get('return_delay_time') * ct.RETURN_DELAY_UNIT_S + len(pkt) * bt
            if self.rng.random() < self.faults.crc:
                buf = bytearray(pkt)
                k = int(self.rng.integers(4, len(buf)))
                buf[k] ^= int(self.rng.integers(1, 256))
                pkt = bytes(buf)
                self.stats['corrupted'] += 1
            self._seq += 1
            heapq.heappush(self._out, (t, self._seq, pkt))
            self.stats['answers'] += 1
        self.bus_free = t

    def on_bytes(self, data: bytes, now: float) -> None:
        """Feed bytes from the host; schedule the answers."""
        host = self.host_baud()
        for item in self.parser.feed(data):
            answers = self.handle(item, now)
            answers = [(sid, pkt) for sid, pkt in answers
                       if self._servo_baud(self.arm.by_id[sid]) == host]
            self._schedule(item.wire_length, answers, now)

    def check_watchdogs(self, now: float) -> list[int]:
        """Expire the Bus Watchdog of servos silent for longer than it; return their IDs."""
        if now - min(self.heard) <= ct.BUS_WATCHDOG_UNIT_S:
            # every servo heard within the shortest watchdog (one unit): none can expire. The
            # loop asks at every wake, 1.3-1.4 kHz beside a 100 Hz driver: the whole check took
            # 8-11 us a call there, this one 2.5 us
            return []
        expired = []
        for i, reg in enumerate(self.arm.servos):
            units = reg.get('bus_watchdog')
            if units > 0 and self.arm.torque_on[i] and \
                    now - self.heard[i] > units * ct.BUS_WATCHDOG_UNIT_S:
                self.arm.expire_watchdog(i)
                expired.append(reg.get('id'))
        if expired:
            self.echo(f'bus watchdog expired: servo IDs {expired}')
        return expired

    def state_time_ns(self) -> int:
        """Wall-clock time (``time.time_ns()``) of the arm's present physics state.

        The physics advances in whole steps on the emulator's own schedule, so a read answers
        the state of the last step done, up to one step older than the arrival of the request.
        """
        dt_ns = int(round(self.arm.dt * 1e9))
        return self._wall0_ns + (self.arm.step_count - self._steps0) * dt_ns

    # ---- the loop -------------------------------------------------------------------------------
    def stop(self, *_args: object) -> None:
        """Ask :meth:`serve` to return."""
        self.running = False

    def serve(self, duration_s: float | None = None) -> None:
        """Plug in, print ``ready <link>`` and serve until stopped."""
        self.plug()
        for dev in self.devices:
            dev.plug()
        self.echo(f'ready {self.link}')
        arm = self.arm
        dt = arm.dt
        t0 = time.monotonic()
        self._wall0_ns = time.time_ns() - int((time.monotonic() - t0) * 1e9)
        steps0 = self._steps0 = arm.step_count
        faults = self.faults
        plugged = True
        unplug_at = faults.unplug_at
        replug_at = faults.replug_at
        try:
            while self.running:
                now = time.monotonic()
                since = now - t0
                if duration_s is not None and since >= duration_s:
                    break
                if plugged and unplug_at is not None and since >= unplug_at:
                    self.unplug()
                    plugged = False
                    unplug_at = None
                    self.echo('unplugged')
                if not plugged and replug_at is not None and since >= replug_at:
                    self.plug()
                    plugged = True
                    replug_at = None
                    self.echo(f'replugged {self.link}')
                due = int(since / dt) - (arm.step_count - steps0)
                if due > MAX_CATCH_UP_STEPS:  # fell behind (CPU): slip instead of bursting
                    # the missed steps are forgotten: moving steps0 back lowers the next due
                    # (adding them instead doubled the backlog each pass, until the float
                    # conversion below overflowed and the emulator died)
                    steps0 -= due - MAX_CATCH_UP_STEPS
                    self._steps0 = steps0
                    due = MAX_CATCH_UP_STEPS
                if due > 0:
                    arm.step(due)
                now = time.monotonic()
                device_wake = min((dev.tick(now) for dev in self.devices), default=math.inf)
                while self._out and self._out[0][0] <= now:
                    _t, _s, pkt = heapq.heappop(self._out)
                    if self.master is not None:
                        try:
                            os.write(self.master, pkt)
                        except OSError:
                            pass
                next_step = t0 + (arm.step_count - steps0 + 1) * dt
                wake = min(next_step, self._out[0][0]) if self._out else next_step
                wake = min(wake, device_wake)
                timeout = max(0.0, wake - time.monotonic())
                if self.master is None:  # unplugged: the servos hear nobody
                    self.check_watchdogs(time.monotonic())
                    time.sleep(min(timeout, 0.001))
                    continue
                readable, _, _ = select.select([self.master], [], [], timeout)
                if not readable:  # nothing from the host is waiting: silence is real
                    self.check_watchdogs(time.monotonic())
                if readable:
                    try:
                        data = os.read(self.master, 4096)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        data = b''  # EIO: nobody has the slave open; keep serving
                    if data:
                        self.on_bytes(data, time.monotonic())
        finally:
            self.unplug()
            for dev in self.devices:
                dev.unplug()


def main(robot: str, reality: str, link: str, baud: int, faults: str, seed: int,
         duration_s: float | None = None, rt_priority: int = 0, cpu_affinity: str = '',
         camera: bool = False, camera_port: int = 0, camera_faults: str = '',
         trace: str = '', role: str = 'follower', operator: str = '',
         eeprom: str = '', imu_link: str = '', imu_rate_hz: float = 200.0,
         imu_baud: int = 115_200, scene: str = '') -> int:
    """Run the emulator in this process (``simreal emulate``).

    ``camera``: serve the virtual camera; ``scene``: a scene (name or path) around the robot,
    its free objects placed by ``place`` lines on stdin (:mod:`~simreal_ros.hardware.emulator.
    placer`); ``trace``: see the module; ``role`` ``leader``: the
    servos are a leader arm moved by the scripted ``operator``
    (:mod:`simreal_ros.hardware.emulator.operator`); ``eeprom``: the servos' EEPROM file
    (:meth:`~simreal_ros.hardware.emulator.reality.VirtualArm.attach_eeprom`).
    """
    from simreal_ros.core import realtime
    rt = realtime.RtSettings(realtime.check_priority(rt_priority, 'simreal emulate',
                                                     '--rt-priority'),
                             realtime.parse_cpus(cpu_affinity, 'simreal emulate',
                                                 '--cpu-affinity'))
    from simreal_ros.core.dynamics import load_overlay
    from simreal_ros.core.robot import load_robot
    spec = load_robot(robot)
    overlay = load_overlay(reality) if reality else None
    if scene and role == 'leader':
        raise SimrealError('--scene surrounds the follower robot (its cameras see it); a '
                           'leader arm has none (leave out --scene with --role leader)')
    from simreal_ros.sim.scene import load_scene
    scene_spec = load_scene(scene) if scene else None
    fault_cfg = Faults.parse(faults)
    link_path = Path(link)
    if not link_path.parent.is_dir():
        raise SimrealError(f'--link {link}: the directory {link_path.parent} does not exist')
    if link_path.exists() and not link_path.is_symlink():
        raise SimrealError(f'--link {link}: exists and is not a symlink; choose another path')
    from simreal_ros.hardware.emulator import operator as op
    if role not in op.ROLES:
        raise SimrealError(f'--role {role}: expected one of {list(op.ROLES)}')
    if operator and role != 'leader':
        raise SimrealError('--operator moves a leader arm: use it with --role leader')
    if role == 'leader':
        if camera:
            raise SimrealError("--camera serves the follower robot's cameras; a leader arm "
                               'has none (leave out --camera with --role leader)')
        arm: VirtualArm = op.LeaderArm(spec, op.Operator(spec, op.OperatorConfig.parse(
            operator or 'chirp')), overlay, seed=seed)
    else:
        arm = VirtualArm(spec, overlay, seed=seed, scene=scene_spec)
    if fault_cfg.eeprom_drop:
        if fault_cfg.eeprom_drop not in arm.by_id:
            raise SimrealError(f'--faults eeprom_drop={fault_cfg.eeprom_drop}: expected a servo '
                               f'ID of {spec.name} ({sorted(arm.by_id)})')
        arm.drop_eeprom_ids = frozenset({fault_cfg.eeprom_drop})
    if eeprom:
        if not Path(eeprom).parent.is_dir():
            raise SimrealError(f'--eeprom {eeprom}: the directory {Path(eeprom).parent} does '
                               f'not exist')
        arm.attach_eeprom(eeprom)
    try:
        # line-buffered: a reader sees every sync read that was answered, up to the last
        trace_file = open(trace, 'w', encoding='utf-8', buffering=1) if trace else None
    except OSError as exc:
        raise SimrealError(f'--trace {trace}: cannot write it ({exc.strerror})') from None
    emu = BusEmulator(arm, link_path, baud, fault_cfg,
                      trace=(lambda line: print(line, file=trace_file)) if trace_file else None)
    from simreal_ros.hardware.emulator.virtual_imu import attach_imu
    attach_imu(emu, imu_link, imu_rate_hz, imu_baud, seed)
    return serve_until_stopped(emu, reality, rt, duration_s, trace_file,
                               (camera_port, camera_faults) if camera else None)


def serve_until_stopped(emu: BusEmulator, reality: Any, rt: Any, duration_s: float | None,
                        trace_file: Any, camera: tuple[int, str] | None) -> int:
    """Serve ``emu`` (and the virtual cameras, ``camera`` = (port, faults)) until stopped.

    What every family's ``simreal emulate`` does once its bus emulator is built: SIGTERM and
    SIGINT stop it, the loop runs with the real-time settings ``rt``, and the cameras and the
    trace file are closed however it ends. Returns the exit code (0).
    """
    from simreal_ros.core import realtime
    from simreal_ros.sim.placement import movable_objects
    floating = emu.arm.robot.floating and getattr(emu.arm, 'operator', None) is None
    placer = None
    if movable_objects(getattr(emu.arm, 'scene', None)):  # `place NAME X Y Z` on stdin
        from simreal_ros.hardware.emulator.placer import ScenePlacer
        placer = ScenePlacer(emu.arm, emu.echo, read=not floating)
        emu.devices.append(placer)
    from simreal_ros.hardware.emulator import operator as op
    if isinstance(emu.arm, (op.LeaderArm, op.StsLeaderArm)) and emu.arm.operator.cfg.cue:
        emu.devices.append(op.OperatorCue(emu.arm, emu.echo, emu.state_time_ns))  # `start`
    if floating:  # `push ...` and `truth ...` on stdin (hardware/emulator/hidden_world.py)
        from simreal_ros.hardware.emulator.hidden_world import HiddenWorld
        emu.devices.append(HiddenWorld(emu.arm, emu.echo, emu.state_time_ns, placer))
    cameras: list[Any] = []
    if camera is not None:  # hardware/emulator/virtual_camera.py: MJPEG over HTTP on 127.0.0.1
        from simreal_ros.hardware.emulator.virtual_camera import start_cameras
        cameras = start_cameras(emu.arm, reality, camera[0], camera[1], emu.echo)
    signal.signal(signal.SIGTERM, emu.stop)
    signal.signal(signal.SIGINT, emu.stop)
    sys.setswitchinterval(0.0002)
    applied = realtime.apply_to_current_thread(rt, 'emulator')
    if applied.warning:
        print(f'warning: {applied.warning}', file=sys.stderr, flush=True)
    elif rt.enabled:
        print(f'emulator loop: {applied.policy} priority {applied.priority}', flush=True)
    try:
        emu.serve(duration_s)
    finally:
        for cam in cameras:
            cam.close()
        if trace_file is not None:
            trace_file.close()
    return 0
