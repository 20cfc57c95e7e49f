"""The virtual IMU: a WitMotion WT901 on its own pseudo-terminal, reading the emulator's physics.

``simreal emulate --robot QUADRUPED --link BUS --imu-link IMU`` adds one :class:`VirtualImu`
to the bus emulator's loop (:class:`~simreal_ros.hardware.emulator.emulator.BusEmulator`
``devices``): a second pty whose link is ``IMU``, printed as ``imu IMU`` after the bus's
``ready`` line, before it. The device streams, unasked, what a WT901 streams
(:mod:`simreal_ros.hardware.imu.witmotion`): one sample of four packets (acceleration, angular
velocity, angle, quaternion; 44 bytes) every ``1 / rate_hz`` of physics time (``--imu-rate``,
default 200 Hz, the device's highest), each packet leaving when its bytes would have finished
on the wire at ``--imu-baud`` (default 115200; 44 bytes take 3.8 ms there). A rate whose
samples do not fit the baud rate is refused, as the device's configuration tool does.

What it measures is the physics' IMU at the robot spec's ``imu`` site (MuJoCo's framequat, gyro
and accelerometer sensors: the attitude of the sensor axes in the level start frame, angular
velocity in the sensor axes, specific force in the sensor axes: +9.81 m/s^2 on z lying
level), the very quantities the sim bridge's ``imu/data`` carries, then the hidden reality's
IMU imperfections (:class:`~simreal_ros.hardware.emulator.reality.Imperfections`: white noise,
turn-on bias, heading drift, latency) and the protocol's quantisation (16 g, 2000 deg/s,
1/32768 of full scale). Temperature reads the reality's ambient temperature, voltage 5.0 V.
Bytes the host writes (the device's configuration commands) are read and dropped: the
emulated device keeps its settings.

With ``--trace FILE`` every sample sent adds one line ``imu TIME_NS qw qx qy qz gx gy gz ax ay
az base_z=Z``: the true values before the reality's errors, ``TIME_NS`` the wall-clock time
(the clock of ROS stamps) of the physics state sampled, as the bus's ``sync_read`` lines, and the
base's height when the sample was sent, so a test can compare ``imu/data`` with the physics.
"""

from __future__ import annotations

from collections import deque
import math
import os
from pathlib import Path
import time
from typing import Callable

import numpy as np

from simreal_ros.core.legged import quat_from_rotvec, quat_mul
from simreal_ros.errors import SimrealError
from simreal_ros.hardware.emulator.pty import close_pty_link, open_pty_link
from simreal_ros.hardware.emulator.reality import VirtualArm
from simreal_ros.hardware.imu import witmotion as wit

SAMPLE_BYTES = 4 * wit.PACKET_LEN


class VirtualImu:
    """A WT901 on a pty whose link is ``link``, sampling ``arm``'s physics at ``rate_hz``."""

    def __init__(self, arm: VirtualArm, link: str | Path, rate_hz: float = 200.0,
                 baud: int = 115_200, seed: int = 0) -> None:
        if arm.robot.imu is None:
            raise SimrealError(f'--imu-link {link}: robot {arm.robot.name} has no imu in its spec '
                               f'({arm.robot.source}): it has no IMU to emulate')
        if rate_hz not in wit.RATES_HZ:
            raise SimrealError(f'--imu-rate {rate_hz:g}: expected one of the WT901 rates '
                               f'{list(wit.RATES_HZ)} Hz')
        if baud not in wit.BAUDS:
            raise SimrealError(f'--imu-baud {baud}: expected one of the WT901 rates '
                               f'{list(wit.BAUDS)}')
        if SAMPLE_BYTES * 10 * rate_hz > baud:
            raise SimrealError(f'--imu-rate {rate_hz:g} needs {SAMPLE_BYTES * 10 * rate_hz:g} '
                               f'bit/s: more than --imu-baud {baud} carries')
        self.arm = arm
        self.link = Path(link)
        self.rate_hz = rate_hz
        self.baud = baud
        self.master: int | None = None
        self.slave: int | None = None
        imp = arm.imp
        self.imp = imp
        rng = np.random.default_rng(seed + 104729)
        self.rng = rng
        self.gyro_bias = imp.imu_gyro_bias_rad_s * rng.choice((-1.0, 1.0), 3)
        self.accel_bias = imp.imu_accel_bias_m_s2 * rng.choice((-1.0, 1.0), 3)
        self.every_steps = max(1, int(round(1.0 / (rate_hz * arm.dt))))
        self.latency_steps = int(round(imp.imu_latency_s / arm.dt))
        self.next_step = arm.step_count + 1  # the sensors read 0 before the first step
        #: (physics step, its time_ns, quat, gyro, acc) of the samples taken, held back by the
        #: latency
        self._held: deque[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]] = deque()
        #: the wall-clock time (``time.time_ns()``) of the physics' present state: the bus
        #: emulator's ``state_time_ns`` once attached (it knows when the physics slipped)
        self.state_time_ns: Callable[[], int] = time.time_ns
        self._out: deque[tuple[float, bytes]] = deque()
        self.stats = {'samples': 0, 'bytes': 0, 'host_bytes': 0}
        #: called with (time_ns of the physics state, quat, gyro, acc) of every sample sent,
        #: before the reality's errors
        self.on_sample: Callable[[int, np.ndarray, np.ndarray, np.ndarray], None] | None = None
        #: prints ``imu LINK`` when plugged (the emulator's echo; None: silent)
        self.echo: Callable[[str], None] | None = None

    # ---- the port -------------------------------------------------------------------------
    def plug(self) -> None:
        """Open the pty and point the link at it."""
        self.master, self.slave = open_pty_link(self.link)
        if self.echo is not None:
            self.echo(f'imu {self.link}')

    def unplug(self) -> None:
        """Remove the link and close the pty."""
        close_pty_link(self.link, self.master, self.slave)
        self.master = self.slave = None
        self._out.clear()

    # ---- the device -------------------------------------------------------------------------
    def measure(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return the physics' IMU now: (quaternion wxyz, gyro rad/s, specific force m/s^2)."""
        obs = self.arm.sim.observe()
        assert obs.imu_quat_wxyz is not None and obs.imu_gyro is not None \
            and obs.imu_acc is not None
        return obs.imu_quat_wxyz, obs.imu_gyro, obs.imu_acc

    def reading(self, quat: np.ndarray, gyro: np.ndarray, acc: np.ndarray,
                step: int) -> bytes:
        """Return the 44 bytes the device sends for a true state (reality's errors applied)."""
        imp = self.imp
        g = gyro + self.gyro_bias
        a = acc + self.accel_bias
        if imp.imu_gyro_noise_rad_s:
            g = g + self.rng.normal(0.0, imp.imu_gyro_noise_rad_s, 3)
        if imp.imu_accel_noise_m_s2:
            a = a + self.rng.normal(0.0, imp.imu_accel_noise_m_s2, 3)
        q = quat
        if imp.imu_yaw_drift_rad_s:  # the heading the filter reports turns about world z
            q = quat_mul(quat_from_rotvec(np.array(
                [0.0, 0.0, imp.imu_yaw_drift_rad_s * step * self.arm.dt])), quat)
        return wit.encode_sample(tuple(a), tuple(g), tuple(q), imp.ambient_temp_c)

    def tick(self, now: float) -> float:
        """Take the samples due by the physics' step count, send the bytes due by ``now``.

        Returns the monotonic time of the next byte due (inf when none is queued): the
        next sample is due after a physics step, which wakes the loop anyway.
        """
        arm = self.arm
        if arm.step_count >= self.next_step:
            quat, gyro, acc = self.measure()
            self._held.append((arm.step_count, self.state_time_ns(), quat, gyro, acc))
            # missed sample times (a slipped loop) are skipped, as a device's timer would
            while self.next_step <= arm.step_count:
                self.next_step += self.every_steps
        bt = 10.0 / self.baud
        while self._held and self._held[0][0] + self.latency_steps <= arm.step_count:
            step, t_ns, quat, gyro, acc = self._held.popleft()
            data = self.reading(quat, gyro, acc, step)
            self.stats['samples'] += 1
            if self.on_sample is not None:
                self.on_sample(t_ns, quat, gyro, acc)
            t = max(now, self._out[-1][0]) if self._out else now
            for k in range(0, len(data), wit.PACKET_LEN):
                t += wit.PACKET_LEN * bt
                self._out.append((t, data[k:k + wit.PACKET_LEN]))
        if self.master is None:
            self._out.clear()
            return math.inf
        try:  # the host's configuration writes: heard and dropped
            self.stats['host_bytes'] += len(os.read(self.master, 4096))
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            pass  # EIO: nobody has the port open
        while self._out and self._out[0][0] <= now:
            _t, pkt = self._out.popleft()
            try:
                os.write(self.master, pkt)
                self.stats['bytes'] += len(pkt)
            except OSError:
                pass  # nobody reading (buffer full or closed): the bytes are lost, as on a wire
        return self._out[0][0] if self._out else math.inf


def attach_imu(emu: object, link: str, rate_hz: float, baud: int, seed: int) -> None:
    """Add a :class:`VirtualImu` on ``link`` to a bus emulator (``simreal emulate``).

    Prints ``imu LINK`` once the bus is ready; a floating-base robot emulated without
    ``--imu-link`` gets a ``note:`` line on stderr (its driver needs ``imu_port:=``).
    """
    import sys
    arm = emu.arm  # type: ignore[attr-defined]
    if not link:
        if arm.robot.base is not None and arm.robot.imu is not None:
            print(f'note: {arm.robot.name} has a floating base: without --imu-link its IMU is '
                  f'not emulated, and backend:=real needs imu_port:= (docs/legged.md)',
                  file=sys.stderr, flush=True)
        return
    path = Path(link)
    if not path.parent.is_dir():
        raise SimrealError(f'--imu-link {link}: the directory {path.parent} does not exist')
    if path.exists() and not path.is_symlink():
        raise SimrealError(f'--imu-link {link}: exists and is not a symlink; choose another '
                           f'path')
    if path.absolute() == Path(emu.link).absolute():  # type: ignore[attr-defined]
        raise SimrealError(f'--imu-link {link}: the same path as --link: the IMU needs a port '
                           f'of its own')
    imu = VirtualImu(arm, path, rate_hz, baud, seed)
    imu.echo = emu.echo  # type: ignore[attr-defined]
    imu.state_time_ns = emu.state_time_ns  # type: ignore[attr-defined]
    trace = emu.trace  # type: ignore[attr-defined]
    if trace is not None:
        def trace_sample(t_ns: int, quat: np.ndarray, gyro: np.ndarray,
                         acc: np.ndarray) -> None:
            base = arm.sim.observe().base
            z = float(base.position[2]) if base is not None else float('nan')
            trace(f'imu {t_ns} ' + ' '.join(f'{v:.6g}' for v in (*quat, *gyro, *acc))
                  + f' base_z={z:.6g}')
        imu.on_sample = trace_sample
    emu.devices.append(imu)  # type: ignore[attr-defined]
