"""The virtual Feetech STS bus: the device side of the STS protocol on a pseudo-terminal.

``simreal emulate --robot SPEC --link PATH`` runs :class:`StsBusEmulator` when the spec's
``bus.family`` is ``feetech``: the same pty, event loop, timing and faults as the Dynamixel
bus (:class:`~simreal_ros.hardware.emulator.emulator.BusEmulator`: every answer leaves when it
would have finished on the wire, at 10 bits a byte, after the servo's Return Delay Time), with
STS packets (:mod:`simreal_ros.hardware.feetech.protocol`) and STS3215 servos
(:mod:`simreal_ros.hardware.emulator.sts_servo`). What the vendor SDK (``scservo_sdk``) sends
is answered byte for byte as a servo does:

* PING: an empty status; READ (address, length): the bytes; WRITE / REG_WRITE + ACTION:
  applied, an empty status; SYNC READ (broadcast): one status per listed servo, in the order
  of the list; SYNC WRITE: applied, no answer; other instructions: no answer;
* every status packet's ERROR byte is the servo's Status (65) bits;
* Status Return Level (8) 0: only PING and READ are answered; broadcasts never are;
* a packet with a bad checksum is ignored (no answer), as an STS servo does.

Faults (``--faults``): those of the Dynamixel bus (``crc=P`` corrupts a status packet,
``timeout=P`` drops a request's answers, ``late=P``/``late_s``, ``unplug_at``/``replug_at``,
``seed``), and ``power_cycle_at=T`` (s after ready): every servo loses power for
``power_off_s`` (default 0.5 s; no answers meanwhile, prints ``power off``), then boots with
its flash contents (what was written while locked is gone) and torque off (prints
``power on``). There is no Bus Watchdog to expire.

``--role leader --operator chirp|waypoints`` serves a leader arm instead (LeRobot's SO-101
leader: STS3215 servos read with torque off): the same servos and memory table, the joints
where the scripted operator's hand puts them
(:class:`~simreal_ros.hardware.emulator.operator.StsLeaderArm`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
import time
from typing import Any, Callable

from simreal_ros.errors import ConfigError, SimrealError
from simreal_ros.hardware.emulator.emulator import BusEmulator, Faults, serve_until_stopped
from simreal_ros.hardware.emulator.sts_servo import StsArm
from simreal_ros.hardware.feetech import control_table as ct
from simreal_ros.hardware.feetech import protocol as p

#: the rates the vendor SDK can set (PortHandler.getCFlagBaud) that the STS3215 offers
BAUDS = (38_400, 57_600, 115_200, 128_000, 250_000, 500_000, 1_000_000)


@dataclass(frozen=True)
class StsFaults:
    """The Dynamixel bus's faults plus a power cycle of every servo."""

    base: Faults
    power_cycle_at: float | None = None
    power_off_s: float = 0.5

    @classmethod
    def parse(cls, text: str) -> 'StsFaults':
        """Parse ``crc=0.01,timeout=0.005,power_cycle_at=3,power_off_s=0.5,seed=1`` etc."""
        mine: dict[str, float] = {}
        rest = []
        for part in filter(None, (s.strip() for s in text.split(','))):
            key, _, value = part.partition('=')
            if key.strip() in ('power_cycle_at', 'power_off_s'):
                try:
                    mine[key.strip()] = float(value)
                except ValueError:
                    raise ConfigError('--faults', key.strip(), 'a number', value) from None
            else:
                rest.append(part)
        at = mine.get('power_cycle_at')
        if at is not None and at < 0:
            raise ConfigError('--faults', 'power_cycle_at', 'a time >= 0 (s after ready)', at)
        off = mine.get('power_off_s', 0.5)
        if not 0.0 < off <= 60.0:
            raise ConfigError('--faults', 'power_off_s', 'a time in (0, 60] s', off)
        return cls(Faults.parse(','.join(rest)), at, off)


class StsBusEmulator(BusEmulator):
    """A pty that answers like a bus of STS3215 servos on a MuJoCo arm."""

    def __init__(self, arm: StsArm, link: str | Path, baud: int = 1_000_000,
                 faults: StsFaults | None = None,
                 echo: Callable[[str], None] | None = None,
                 trace: Callable[[str], None] | None = None) -> None:
        code = {v: k for k, v in ct.BAUD_RATES.items()}.get(baud)
        if code is None or baud not in BAUDS:
            raise ConfigError('--baud', 'baud', f'one of the STS rates the SDK sets {BAUDS}',
                              baud)
        sts_faults = faults or StsFaults(Faults())
        # the base class knows Dynamixel rates only: start it at 1 Mbps, then set the STS code
        super().__init__(arm, link, 1_000_000, sts_faults.base, echo, trace)
        self.baud = baud
        for reg in arm.servos:
            reg.set('baud_rate', code)
        self.arm: StsArm = arm
        self.sts_faults = sts_faults
        self.parser = p.PacketParser()  # type: ignore[assignment]
        self.stats['rejected_checksum'] = 0
        self._t0: float | None = None
        self._power = 'on'  # on -> off -> back (the cycle happens once)

    def _servo_baud(self, i: int) -> int:
        return ct.BAUD_RATES.get(self.arm.servos[i].get('baud_rate'), 0)

    def serve(self, duration_s: float | None = None) -> None:
        """Plug in, print ``ready <link>`` and serve until stopped."""
        self._t0 = time.monotonic()
        super().serve(duration_s)

    def _power_fault(self, now: float) -> None:
        at = self.sts_faults.power_cycle_at
        if at is None or self._t0 is None or self._power == 'back':
            return
        since = now - self._t0
        if self._power == 'on' and since >= at:
            self._power = 'off'
            self._out.clear()
            self.echo('power off')
        if self._power == 'off' and since >= at + self.sts_faults.power_off_s:
            self._power = 'back'
            for i in range(self.arm.n):
                self.arm.power_cycle(i)
            self.echo('power on')

    def check_watchdogs(self, now: float) -> list[int]:
        """No Bus Watchdog on an STS; the power-cycle fault is timed here (and per request)."""
        self._power_fault(now)
        return []

    def on_bytes(self, data: bytes, now: float) -> None:
        """Feed bytes from the host; schedule the answers."""
        self._power_fault(now)
        super().on_bytes(data, now)

    def handle(self, item: Any, now: float) -> list[tuple[int, bytes]]:
        """Process one packet; return the answers [(servo id, status packet), ...] in order."""
        arm = self.arm
        if isinstance(item, p.Rejected):
            self.stats['rejected_' + item.reason] += 1
            return []  # an STS servo ignores a packet it cannot trust
        if self._power == 'off':
            return []
        self.stats['packets'] += 1
        inst, pid, prm = item.instruction, item.packet_id, item.params
        broadcast = pid == p.BROADCAST_ID
        ids = sorted(arm.by_id) if broadcast else [pid] if pid in arm.by_id else []
        if not ids:
            return []
        if inst in (p.INST_READ, p.INST_SYNC_READ):  # only a read needs the present values
            arm.update_present()
        out: list[tuple[int, bytes]] = []

        def answer(sid: int, data: bytes = b'') -> None:
            reg = arm.servos[arm.by_id[sid]]
            if inst not in (p.INST_PING, p.INST_READ, p.INST_SYNC_READ) and \
                    reg.get('status_return_level') == 0:
                return
            out.append((sid, p.status(sid, reg.get('status'), data)))

        if inst == p.INST_SYNC_READ:
            if broadcast and len(prm) >= 2:
                addr, length = prm[0], prm[1]
                line = [f'sync_read {addr} {length} {self.state_time_ns()}']
                for sid in prm[2:]:
                    if sid in arm.by_id:
                        data = arm.servos[arm.by_id[sid]].read(addr, length)
                        if data is not None:
                            answer(sid, data)
                            line.append(f'{sid}:{data.hex()}')
                if self.trace is not None:
                    self.trace(' '.join(line))
            return out
        if inst == p.INST_SYNC_WRITE:
            if broadcast and len(prm) >= 2 and prm[1] and not (len(prm) - 2) % (1 + prm[1]):
                addr, length = prm[0], prm[1]
                stride = 1 + length
                rest = prm[2:]
                if self.trace is not None:
                    self.trace(' '.join([f'sync_write {addr} {length} {time.time_ns()}'] + [
                        f'{rest[k]}:{rest[k + 1:k + stride].hex()}'
                        for k in range(0, len(rest), stride)]))
                for k in range(0, len(rest), stride):
                    sid = rest[k]
                    if sid in arm.by_id:
                        i = arm.by_id[sid]
                        arm.write(i, arm.servos[i].check_write(addr, rest[k + 1:k + stride]))
            return out
        for sid in ids:
            i = arm.by_id[sid]
            reg = arm.servos[i]
            if inst == p.INST_PING:
                if not broadcast:
                    answer(sid)
            elif inst == p.INST_READ:
                if not broadcast and len(prm) == 2:
                    data = reg.read(prm[0], prm[1])
                    if data is not None:
                        answer(sid, data)
            elif inst in (p.INST_WRITE, p.INST_REG_WRITE) and len(prm) >= 2:
                items = reg.check_write(prm[0], prm[1:])
                if inst == p.INST_WRITE:
                    arm.write(i, items)
                else:
                    self._registered[sid] = (prm[0], bytes(prm[1:]))
                if not broadcast:
                    answer(sid)
            elif inst == p.INST_ACTION:
                pending = self._registered.pop(sid, None)
                if pending is not None:
                    arm.write(i, reg.check_write(*pending))
                if not broadcast:
                    answer(sid)
        return out


def _tight_timer_slack() -> None:
    """1 us timer slack for this process (Linux; default 50 us), where the kernel allows it.

    The loop sleeps in ``select`` until each status packet is due, 21 us apart at 1 Mbps for
    the 15-byte state block: with the default slack each answer may leave up to 50 us late,
    a wire slower than the servos' (a real servo is hardware that is never late).
    """
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK, ns
    except (OSError, AttributeError):
        pass


def main(robot: str, reality: str, link: str, baud: int, faults: str, seed: int,
         duration_s: float | None = None, rt_priority: int = 0, cpu_affinity: str = '',
         camera: bool = False, camera_port: int = 0, camera_faults: str = '',
         trace: str = '', role: str = 'follower', operator: str = '',
         eeprom: str = '', imu_link: str = '', imu_rate_hz: float = 200.0,
         imu_baud: int = 115_200, scene: str = '') -> int:
    """Run the virtual STS bus in this process (``simreal emulate`` of a feetech spec).

    The signature is the Dynamixel emulator's (:func:`emulator.main`); ``role`` ``leader``:
    the servos are a leader arm (torque off) moved by the scripted ``operator``
    (:class:`~simreal_ros.hardware.emulator.operator.StsLeaderArm`); ``eeprom`` (a file keeping
    the EEPROM across restarts) is not offered for STS servos yet.
    """
    from simreal_ros.core import realtime
    from simreal_ros.core.dynamics import load_overlay
    from simreal_ros.core.robot import load_robot
    rt = realtime.RtSettings(realtime.check_priority(rt_priority, 'simreal emulate',
                                                     '--rt-priority'),
                             realtime.parse_cpus(cpu_affinity, 'simreal emulate',
                                                 '--cpu-affinity'))
    spec = load_robot(robot)
    from simreal_ros.hardware.emulator import operator as op
    if role not in op.ROLES:
        raise SimrealError(f'--role {role}: expected one of {list(op.ROLES)}')
    if operator and role != 'leader':
        raise SimrealError('--operator moves a leader arm: use it with --role leader')
    if role == 'leader' and camera:
        raise SimrealError("--camera serves the follower robot's cameras; a leader arm has "
                           'none (leave out --camera with --role leader)')
    if eeprom:
        raise SimrealError('--eeprom: the virtual STS bus keeps its EEPROM only within one run '
                           '(its power_cycle_at fault keeps it); a file is Dynamixel-only so far')
    for k, j in enumerate(spec.joints):
        if ct.find_model(j.servo.model) is None:
            raise ConfigError(str(spec.source), f'joints[{k}].servo.model ({j.name})',
                              f'a Feetech STS model: one of {sorted(ct.MODELS)}', j.servo.model)
    overlay = load_overlay(reality) if reality else None
    if scene and role == 'leader':
        raise SimrealError('--scene surrounds the follower robot (its cameras see it); a '
                           'leader arm has none (leave out --scene with --role leader)')
    from simreal_ros.sim.scene import load_scene
    scene_spec = load_scene(scene) if scene else None
    fault_cfg = StsFaults.parse(faults)
    link_path = Path(link)
    if not link_path.parent.is_dir():
        raise SimrealError(f'--link {link}: the directory {link_path.parent} does not exist')
    if link_path.exists() and not link_path.is_symlink():
        raise SimrealError(f'--link {link}: exists and is not a symlink; choose another path')
    arm = op.StsLeaderArm(spec, op.Operator(spec, op.OperatorConfig.parse(
        operator or 'chirp')), overlay, seed=seed) if role == 'leader' \
        else StsArm(spec, overlay, seed=seed, scene=scene_spec)
    try:
        trace_file = open(trace, 'w', encoding='utf-8', buffering=1) if trace else None
    except OSError as exc:
        raise SimrealError(f'--trace {trace}: cannot write it ({exc.strerror})') from None
    emu = StsBusEmulator(arm, link_path, baud, fault_cfg,
                         trace=(lambda line: print(line, file=trace_file)) if trace_file
                         else None)
    from simreal_ros.hardware.emulator.virtual_imu import attach_imu
    attach_imu(emu, imu_link, imu_rate_hz, imu_baud, seed)
    _tight_timer_slack()
    return serve_until_stopped(emu, reality, rt, duration_s, trace_file,
                               (camera_port, camera_faults) if camera else None)
