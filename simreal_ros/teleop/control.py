"""Teleoperation from a leader arm: joint mapping, safe start, deadman and leader loss, no ROS.

A leader arm (GELLO style: a kinematic copy of the robot with servos in its joints, read with
torque off) is read on its own bus. :class:`LeaderMapping` turns its joint angles into follower
targets, joint by joint::

    follower = sign * scale * (leader - offset_rad)        then clamped to the follower's limits

``offset_rad`` is the leader's reading when the follower's joint is at 0 (what
``simreal calibrate-leader`` measures in a known pose), ``sign`` +1/-1 a reversed servo,
``scale`` a gear ratio (1 for a 1:1 copy).

:class:`TeleopControl` decides, each cycle, whether a follower command is sent, and which:

============== ==================================================================================
state          what happens
============== ==================================================================================
``waiting``    no follower state yet, no leader read yet, or the deadman is released: nothing
               is sent
``far``        ``start_mode`` ``wait``: the follower is more than ``start_tolerance_rad``
               (largest joint difference) from the mapped leader: nothing is sent until the
               operator brings the leader to the follower
``blending``   ``start_mode`` ``blend``: the command starts at the follower's position (clamped
               to the limits) and moves
               towards the mapped leader at ``blend_speed_rad_s`` per joint, until it is within
               ``start_tolerance_rad`` of it
``tracking``   the mapped leader is sent every cycle
``leader_lost`` no leader read for ``leader_timeout_s`` (unplugged, bus silent): nothing is
               sent; the follower's driver holds its last goal. When the leader comes back the
               start check runs again (the leader may have been moved meanwhile)
============== ==================================================================================

Releasing the deadman stops streaming at the next cycle; pressing it again (or a leader
returning) starts from ``far``/``blending`` again: the follower never jumps to a leader that
moved while it was not followed. Time is integer nanoseconds (``time.monotonic_ns()``).

There are two deadman inputs: the ``~/deadman`` service (:meth:`TeleopControl.set_deadman`)
and, when the leader has one, its **button** (:meth:`TeleopControl.set_button`, read from a
servo register every cycle, the ``button_*`` keys of :class:`LeaderConfig`). Streaming needs
both pressed: releasing either stops it in the cycle that sees the release; pressing one while
the other is released starts nothing; when the last one is pressed, the start check runs. So
the hand on the button can always stop the arm, and a supervisor's ``~/deadman false`` cannot
be overridden by the hand (nor the other way round).

A **gripper trigger** (:class:`GripperMap`) replaces the joint mapping of one joint: the
leader's raw reading of that joint (the trigger, no calibration offset) is mapped linearly
from ``trigger_open_rad``..``trigger_closed_rad`` onto the follower's
``open_rad``..``closed_rad``, the fraction clamped to 0..1 (a trigger pushed past its stops
holds the gripper fully open or closed), then clamped to the joint's limits like every joint.

**Gravity/friction compensation** (:func:`compensation_current`, optional): the leader's servos
in current mode push with a light current so the arm floats in the operator's hand: per joint
``gravity_fraction`` times the torque that holds the leader's pose against gravity (the robot's
MuJoCo model: the leader is kinematically the follower), plus ``friction_nm`` in the direction
of motion once the joint moves faster than ``friction_deadband_rad_s``, divided by the motor
constant and clamped to +-``max_current_a``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import math
from pathlib import Path

import numpy as np
import numpy.typing as npt
import yaml

from simreal_ros.core.robot import RobotSpec
from simreal_ros.core.validate import FromMapping, check_number
from simreal_ros.errors import ConfigError

FloatArray = npt.NDArray[np.float64]

START_MODES = ('wait', 'blend')
STATES = ('waiting', 'far', 'blending', 'tracking', 'leader_lost')


@dataclass(frozen=True)
class JointMap:
    """How one follower joint follows the leader."""

    offset_rad: float = 0.0
    sign: int = 1
    scale: float = 1.0


@dataclass(frozen=True)
class GripperMap:
    """A leader trigger mapped linearly onto a follower gripper joint (see the module)."""

    joint: int
    trigger_open_rad: float
    trigger_closed_rad: float
    open_rad: float
    closed_rad: float

    def __post_init__(self) -> None:
        if self.trigger_open_rad == self.trigger_closed_rad:
            raise ValueError('trigger_open_rad and trigger_closed_rad must differ')

    def fraction(self, trigger_rad: float) -> float:
        """Return how far the trigger is closed, 0 (open) .. 1 (closed), clamped."""
        u = (trigger_rad - self.trigger_open_rad) / (self.trigger_closed_rad -
                                                     self.trigger_open_rad)
        return min(1.0, max(0.0, u))

    def target(self, trigger_rad: float) -> float:
        """Return the follower gripper angle for the trigger reading."""
        return self.open_rad + (self.closed_rad - self.open_rad) * self.fraction(trigger_rad)


@dataclass
class LeaderMapping:
    """Leader joint angles -> follower joint targets (robot order), clamped to the limits."""

    robot: RobotSpec
    joints: tuple[JointMap, ...]
    gripper: GripperMap | None = None
    clamped: int = 0
    _offset: FloatArray = field(init=False, repr=False)
    _gain: FloatArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.joints) != self.robot.n:
            raise ValueError(f'{len(self.joints)} joint maps for {self.robot.n} joints')
        if self.gripper is not None and not 0 <= self.gripper.joint < self.robot.n:
            raise ValueError(f'gripper joint index {self.gripper.joint} of {self.robot.n}')
        self._offset = np.array([j.offset_rad for j in self.joints])
        self._gain = np.array([j.sign * j.scale for j in self.joints], dtype=np.float64)

    @classmethod
    def identity(cls, robot: RobotSpec) -> 'LeaderMapping':
        """Return the 1:1 mapping (an uncalibrated copy of the robot)."""
        return cls(robot, tuple(JointMap() for _ in robot.joints))

    def with_gripper(self, gripper: GripperMap | None) -> 'LeaderMapping':
        """Return this mapping with ``gripper`` replacing its joint's mapping."""
        return LeaderMapping(self.robot, self.joints, gripper)

    def raw(self, leader: FloatArray) -> FloatArray:
        """Return the follower angles the leader asks for, before clamping to the limits."""
        leader = np.asarray(leader, dtype=np.float64)
        out: FloatArray = self._gain * (leader - self._offset)
        if self.gripper is not None:
            out[self.gripper.joint] = self.gripper.target(float(leader[self.gripper.joint]))
        return out

    def map(self, leader: FloatArray) -> FloatArray:
        """Return the follower target for the leader angles, clamped to the joint limits."""
        q = self.raw(leader)
        out: FloatArray = np.clip(q, self.robot.lower, self.robot.upper)
        if np.any(out != q):
            self.clamped += 1
        return out

    def offsets_for_pose(self, leader: FloatArray, pose: FloatArray) -> FloatArray:
        """Return the offsets that map ``leader`` onto the follower ``pose`` (calibration)."""
        out: FloatArray = np.asarray(leader, dtype=np.float64) - np.asarray(pose) / self._gain
        return out


def load_calibration(path: str | Path, robot: RobotSpec) -> LeaderMapping:
    """Read a leader calibration file (``simreal calibrate-leader`` writes it).

    Format::

        robot: simreal_arm            # the follower it maps onto (must match)
        joints:
          base_yaw: {offset_rad: 0.012, sign: 1, scale: 1.0}
          ...                         # every joint of the robot; sign and scale optional

    A missing joint, an unknown one, a sign other than +1/-1 or a scale that is not a positive
    number is a ConfigError naming the file and the key.
    """
    src = str(path)
    try:
        data = yaml.safe_load(Path(path).read_text(encoding='utf-8'))
    except FileNotFoundError:
        raise ConfigError(src, '', 'an existing leader calibration file (write one with '
                          'simreal calibrate-leader)', has_got=False) from None
    except yaml.YAMLError as exc:
        raise ConfigError(src, '', 'valid YAML', str(exc).splitlines()[0]) from None
    if not isinstance(data, dict):
        raise ConfigError(src, '', 'a mapping with robot and joints', type(data).__name__)
    if data.get('robot') != robot.name:
        raise ConfigError(src, 'robot', f'{robot.name!r} (the follower robot)',
                          data.get('robot'))
    joints = data.get('joints')
    if not isinstance(joints, dict):
        raise ConfigError(src, 'joints', 'a mapping joint name -> {offset_rad, sign, scale}',
                          joints)
    unknown = sorted(set(joints) - set(robot.joint_names))
    if unknown:
        raise ConfigError(src, f'joints.{unknown[0]}', f'one of {robot.joint_names}',
                          'unknown joint')
    maps = []
    for name in robot.joint_names:
        if name not in joints:
            raise ConfigError(src, f'joints.{name}', 'an entry for every joint', 'missing')
        entry = joints[name]
        if not isinstance(entry, dict):
            raise ConfigError(src, f'joints.{name}', 'a mapping {offset_rad, sign, scale}',
                              entry)
        extra = sorted(set(entry) - {'offset_rad', 'sign', 'scale'})
        if extra:
            raise ConfigError(src, f'joints.{name}.{extra[0]}', 'offset_rad, sign or scale',
                              'unknown key')
        offset = check_number(entry.get('offset_rad', 0.0), src, f'joints.{name}.offset_rad')
        sign = entry.get('sign', 1)
        if sign not in (1, -1) or isinstance(sign, bool):
            raise ConfigError(src, f'joints.{name}.sign', '1 or -1', sign)
        scale = check_number(entry.get('scale', 1.0), src, f'joints.{name}.scale',
                             positive=True)
        maps.append(JointMap(float(offset), int(sign), float(scale)))
    return LeaderMapping(robot, tuple(maps))


def calibration_text(mapping: LeaderMapping, pose_name: str, leader_robot: str) -> str:
    """Return the calibration file for ``mapping`` (YAML with a header saying how it was made)."""
    lines = [f'# leader calibration: the leader ({leader_robot}) held in the pose {pose_name!r}',
             '# follower = sign * scale * (leader - offset_rad), per joint (docs/teleop.md)',
             f'robot: {mapping.robot.name}', 'joints:']
    for name, j in zip(mapping.robot.joint_names, mapping.joints, strict=True):
        lines.append(f'  {name}: {{offset_rad: {j.offset_rad:.6f}, sign: {j.sign}, '
                     f'scale: {j.scale:g}}}')
    return '\n'.join(lines) + '\n'


@dataclass(frozen=True)
class Decision:
    """One cycle's outcome: the command to send (None = nothing) and the state."""

    command: FloatArray | None
    state: str
    distance_rad: float
    events: tuple[str, ...] = ()


class TeleopControl:
    """The safe-start / deadman / leader-loss state machine (see the module docstring)."""

    def __init__(self, mapping: LeaderMapping, *, start_mode: str = 'blend',
                 start_tolerance_rad: float = 0.1, blend_speed_rad_s: float = 0.5,
                 leader_timeout_s: float = 0.1, deadman: bool = True,
                 button: bool | None = None) -> None:
        if start_mode not in START_MODES:
            raise ValueError(f'start_mode {start_mode!r} not in {START_MODES}')
        self.mapping = mapping
        self.names = mapping.robot.joint_names
        self.start_mode = start_mode
        self.tolerance = start_tolerance_rad
        self.blend_speed = blend_speed_rad_s
        self.leader_timeout_ns = int(leader_timeout_s * 1e9)
        self.deadman = deadman
        #: the leader's button: None = the leader has none; False until its first reading
        self.button = button
        self.state = 'waiting'
        self.leader: FloatArray | None = None
        self.leader_ns: int | None = None
        self.follower: FloatArray | None = None
        self._blend: FloatArray | None = None
        self._last_ns: int | None = None
        self.distance_rad = math.nan
        self.engagements = 0
        self.leader_losses = 0

    # ---- inputs --------------------------------------------------------------------------------
    def leader_read(self, position: FloatArray, now_ns: int) -> None:
        """Take a fresh leader reading (robot order, leader angles)."""
        self.leader = np.asarray(position, dtype=np.float64)
        self.leader_ns = now_ns

    def follower_state(self, position: FloatArray) -> None:
        """Take the follower's latest ``joint_states`` position (robot order)."""
        self.follower = np.asarray(position, dtype=np.float64)

    @property
    def enabled(self) -> bool:
        """Whether both deadman inputs allow streaming (the service and the button, if any)."""
        return self.deadman and self.button is not False

    def set_deadman(self, pressed: bool) -> str:
        """Press (True) or release (False) the ``~/deadman`` service; return what it did."""
        if pressed == self.deadman:
            return 'deadman already ' + ('pressed' if pressed else 'released')
        was = self.enabled
        self.deadman = pressed
        if not pressed:
            self._disengage('waiting')
            return 'deadman released: command streaming stopped' if was else \
                'deadman released (the leader button is released too)'
        if self.button is False:
            return 'deadman pressed; the leader button is released: nothing streams until it ' \
                   'is pressed'
        return 'deadman pressed: start check, then streaming'

    def set_button(self, pressed: bool) -> str | None:
        """Take this cycle's reading of the leader's button; return an event on a change."""
        if pressed == self.button:
            return None
        was = self.enabled
        self.button = pressed
        if not pressed:
            self._disengage('waiting')
            return 'deadman button released: command streaming stopped' if was else \
                'deadman button released'
        if not self.deadman:
            return 'deadman button pressed; ~/deadman is released: nothing streams until ' \
                   '~/deadman true'
        return 'deadman button pressed: start check, then streaming'

    def _disengage(self, state: str) -> None:
        self.state = state
        self._blend = None

    # ---- the cycle ------------------------------------------------------------------------------
    def step(self, now_ns: int) -> Decision:
        """Decide this cycle's command from the latest inputs."""
        events: list[str] = []
        dt_s = 0.0 if self._last_ns is None else (now_ns - self._last_ns) / 1e9
        self._last_ns = now_ns
        if self.leader_ns is not None and now_ns - self.leader_ns > self.leader_timeout_ns:
            if self.state != 'leader_lost':
                self.leader_losses += 1
                events.append(f'leader lost: no reading for '
                              f'{(now_ns - self.leader_ns) / 1e9:.2f} s; follower holds')
            self._disengage('leader_lost')
            return Decision(None, self.state, self.distance_rad, tuple(events))
        if self.state == 'leader_lost':
            events.append('leader back: start check again')
            self._disengage('waiting')
        if self.leader is None or self.follower is None or not self.enabled:
            self._disengage('waiting')
            return Decision(None, self.state, self.distance_rad, tuple(events))
        target = self.mapping.map(self.leader)
        if self.state == 'tracking':
            self.distance_rad = float(np.max(np.abs(target - self.follower)))
            return Decision(target, self.state, self.distance_rad, tuple(events))
        if self.state == 'blending':
            assert self._blend is not None
            step = self.blend_speed * dt_s
            self._blend = self._blend + np.clip(target - self._blend, -step, step)
            gap = np.abs(target - self._blend)
            self.distance_rad = float(np.max(gap))
            if self.distance_rad <= self.tolerance:
                events.append('blend done: tracking the leader')
                return self._engage(target, events)
            return Decision(self._blend.copy(), self.state, self.distance_rad, tuple(events))
        gap = np.abs(target - self.follower)
        self.distance_rad = float(np.max(gap))
        if self.distance_rad <= self.tolerance:
            events.append(f'follower within {self.distance_rad:.3f} rad of the leader: '
                          f'tracking')
            return self._engage(target, events)
        if self.start_mode == 'blend':
            self.state = 'blending'
            # from where the follower is, but inside the limits: an arm that sagged under
            # gravity before its driver started can rest past a limit (shoulder_pitch 1.80
            # rad against 1.7 measured on the virtual bus), and no command may leave them
            self._blend = np.clip(self.follower, self.mapping.robot.lower,
                                  self.mapping.robot.upper)
            events.append(f'follower {self.distance_rad:.3f} rad from the leader: blending at '
                          f'{self.blend_speed:g} rad/s')
            return Decision(self._blend.copy(), self.state, self.distance_rad, tuple(events))
        if self.state != 'far':
            worst = self.names[int(np.argmax(gap))]
            events.append(f'start refused: follower {self.distance_rad:.3f} rad from the leader '
                          f'at {worst} (start_tolerance_rad {self.tolerance:g}); move the '
                          f'leader to the follower, or use start_mode blend')
        self.state = 'far'
        return Decision(None, self.state, self.distance_rad, tuple(events))

    def _engage(self, target: FloatArray, events: list[str]) -> Decision:
        self.state = 'tracking'
        self._blend = None
        self.engagements += 1
        return Decision(target, self.state, self.distance_rad, tuple(events))


@dataclass(frozen=True)
class LeaderConfig(FromMapping):
    """Parameters of ``simreal_leader`` (the teleop leader node).

    * ``robot``: the follower's robot spec; ``leader_robot``: the leader arm's ('' = the
      same: a kinematic copy with the same servo IDs).
    * ``port`` / ``baud``: the leader's own bus (0 = the leader spec's baud).
    * ``rate_hz``: leader reads (= ``leader/joint_states`` and ``joint_commands``) per second.
    * ``calibration``: leader calibration file ('' = 1:1 mapping, offsets 0).
    * ``start_mode``, ``start_tolerance_rad``, ``blend_speed_rad_s``, ``leader_timeout_s``:
      see :class:`TeleopControl`.
    * ``deadman_on_start``: start with the deadman pressed (streaming once the start check
      passes); false = nothing moves until ``~/deadman`` is called with true.
    * ``reconnect_period_s``: how often a lost leader port is reopened.
    * ``button_id``: the servo whose register holds the leader's deadman button (0 = none);
      ``button_address``/``button_size``: the register (default Indirect Data 1 of an XM430,
      224, 1 byte); ``button_pressed_value``: the value read while it is pressed (any other
      value = released).
    * ``gripper_joint``: the follower joint driven by the leader's trigger ('' = none; the
      leader joint at the same place is the trigger), ``gripper_trigger_open_rad`` /
      ``gripper_trigger_closed_rad``: the trigger's raw readings when open / squeezed,
      ``gripper_open_rad`` / ``gripper_closed_rad``: the follower joint's targets for them
      (:class:`GripperMap`).
    * ``compensation``: drive the leader's servos in current mode with the light current of
      :func:`compensation_current` (false = torque off, read only); ``gravity_fraction``
      (0..1), ``friction_nm``, ``friction_deadband_rad_s``, ``max_current_a``: its terms.
    """

    SOURCE = 'leader'

    robot: str = 'simreal_arm'
    leader_robot: str = ''
    port: str = ''
    baud: int = 0
    rate_hz: float = 100.0
    calibration: str = ''
    start_mode: str = 'blend'
    start_tolerance_rad: float = 0.1
    blend_speed_rad_s: float = 0.5
    leader_timeout_s: float = 0.1
    deadman_on_start: bool = True
    reconnect_period_s: float = 0.2
    latency_timer_ms: float = 16.0
    diagnostics_period_s: float = 1.0
    button_id: int = 0
    button_address: int = 224
    button_size: int = 1
    button_pressed_value: int = 1
    gripper_joint: str = ''
    gripper_trigger_open_rad: float = 0.0
    gripper_trigger_closed_rad: float = 1.0
    gripper_open_rad: float = 0.0
    gripper_closed_rad: float = 1.0
    compensation: bool = False
    gravity_fraction: float = 0.5
    friction_nm: float = 0.0
    friction_deadband_rad_s: float = 0.05
    max_current_a: float = 0.3

    def __post_init__(self) -> None:
        src = 'leader'
        if not self.port:
            raise ConfigError(src, 'port', "the leader arm's serial port (leader_port:=)",
                              self.port)
        if self.start_mode not in START_MODES:
            raise ConfigError(src, 'start_mode', f'one of {list(START_MODES)}', self.start_mode)
        for key in ('rate_hz', 'start_tolerance_rad', 'blend_speed_rad_s', 'leader_timeout_s',
                    'reconnect_period_s', 'latency_timer_ms', 'diagnostics_period_s'):
            check_number(getattr(self, key), src, key, positive=True)
        if isinstance(self.baud, bool) or not isinstance(self.baud, int) or self.baud < 0:
            raise ConfigError(src, 'baud', "an integer baud rate >= 0 (0 = the spec's)",
                              self.baud)
        for key, lo, hi, what in (('button_id', 0, 252, 'a servo ID 1..252 (0 = no button)'),
                                  ('button_size', 1, 4, 'a register size of 1, 2 or 4 bytes')):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi or \
                    (key == 'button_size' and v == 3):
                raise ConfigError(src, key, what, v)
        for key, hi in (('button_address', 0xFFFF - self.button_size + 1),
                        ('button_pressed_value', (1 << (8 * self.button_size)) - 1)):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= hi:
                raise ConfigError(src, key, f'an integer 0..{hi} (button_size '
                                  f'{self.button_size})', v)
        for key in ('gripper_trigger_open_rad', 'gripper_trigger_closed_rad',
                    'gripper_open_rad', 'gripper_closed_rad'):
            check_number(getattr(self, key), src, key)
        if self.gripper_joint and self.gripper_trigger_open_rad == \
                self.gripper_trigger_closed_rad:
            raise ConfigError(src, 'gripper_trigger_closed_rad', 'a reading other than '
                              f'gripper_trigger_open_rad ({self.gripper_trigger_open_rad:g})',
                              self.gripper_trigger_closed_rad)
        check_number(self.gravity_fraction, src, 'gravity_fraction', minimum=0.0, maximum=1.0)
        check_number(self.friction_nm, src, 'friction_nm', minimum=0.0)
        for key in ('friction_deadband_rad_s', 'max_current_a'):
            check_number(getattr(self, key), src, key, positive=True)
        if self.leader_timeout_s * self.rate_hz < 2:
            raise ConfigError(src, 'leader_timeout_s', f'at least two leader periods '
                              f'(>= {2 / self.rate_hz:g} s at rate_hz {self.rate_hz:g})',
                              self.leader_timeout_s)



def mapping_for(cfg_calibration: str, robot: RobotSpec) -> LeaderMapping:
    """Return the mapping of a calibration file, or 1:1 when none is given."""
    return load_calibration(cfg_calibration, robot) if cfg_calibration else \
        LeaderMapping.identity(robot)


def leader_mapping(cfg: LeaderConfig, robot: RobotSpec, leader: RobotSpec) -> LeaderMapping:
    """Return the node's mapping (calibration and gripper), checking the robot-bound keys.

    Those are the button's servo (on the leader), the gripper joint and its targets (within the
    follower joint's limits): ConfigErrors naming the key.
    """
    src = 'leader'
    ids = [j.servo.servo_id for j in leader.joints]
    if cfg.button_id and cfg.button_id not in ids:
        raise ConfigError(src, 'button_id', f'a servo ID of the leader {leader.name} {ids} '
                          f'(0 = no button)', cfg.button_id)
    mapping = mapping_for(cfg.calibration, robot)
    if not cfg.gripper_joint:
        return mapping
    if cfg.gripper_joint not in robot.joint_names:
        raise ConfigError(src, 'gripper_joint', f'a joint of {robot.name} '
                          f'{list(robot.joint_names)}', cfg.gripper_joint)
    k = robot.joint_names.index(cfg.gripper_joint)
    for key in ('gripper_open_rad', 'gripper_closed_rad'):
        v = getattr(cfg, key)
        if not robot.lower[k] <= v <= robot.upper[k]:
            raise ConfigError(src, key, f'an angle within {cfg.gripper_joint} limits '
                              f'[{robot.lower[k]:g}, {robot.upper[k]:g}]', v)
    return mapping.with_gripper(GripperMap(
        k, cfg.gripper_trigger_open_rad, cfg.gripper_trigger_closed_rad, cfg.gripper_open_rad,
        cfg.gripper_closed_rad))


def button_pressed(raw: int, cfg: LeaderConfig) -> bool:
    """Return whether the button register's value ``raw`` means pressed."""
    return raw == cfg.button_pressed_value


def compensation_current(hold_nm: FloatArray, velocity_rad_s: FloatArray,
                         torque_per_amp: FloatArray, cfg: LeaderConfig) -> FloatArray:
    """Return the leader's compensation currents (A, robot order; see the module).

    ``hold_nm``: the torque that holds the leader's pose against gravity (MuJoCo's
    ``qfrc_bias`` at rest), ``velocity_rad_s``: the leader's joint velocities.
    """
    v = np.asarray(velocity_rad_s, dtype=np.float64)
    moving = np.abs(v) > cfg.friction_deadband_rad_s
    torque = cfg.gravity_fraction * np.asarray(hold_nm, dtype=np.float64) + \
        np.where(moving, cfg.friction_nm * np.sign(v), 0.0)
    out: FloatArray = np.clip(torque / torque_per_amp, -cfg.max_current_a, cfg.max_current_a)
    return out
