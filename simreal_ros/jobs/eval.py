"""``simreal eval``: seeded goal episodes through the real ROS stack, sim or real.

The stack is the planner's (``backend:=sim|real ... policy:=<spec> policy_autostart:=true``),
started by the launcher as separate processes; an in-process client publishes the goals on
``goal`` and measures ``joint_states`` and ``joint_commands``. Goals are drawn from a seeded
generator (reachable: inside the limits by a margin, contact-free, holdable), so the same
``--seed`` gives the same episodes on every backend and engine (``--engine pybullet``: the
policy trained in MuJoCo, evaluated in the other engine), and ``--compare`` turns two runs
into the performance gap ``|J_a - J_b|`` per metric, in a table next to both runs' figures.

The robot is the policy spec's (``robot:=`` defaults to it). On ``real`` and ``twin`` without
``port:=``, eval starts the virtual servo bus of that robot, with ``--reality`` (an overlay name
or path for that robot; '' = nominal) as its hidden reality.

A visuomotor policy (a spec with image terms, ``simreal_arm_visual_reach``) gets no goal: each
episode places the visual reach task's ball where the camera renders it, in the sim bridge's
scene (``scene:=reach_target``) or in the virtual robot's (``simreal emulate --camera --scene
reach_target``, its camera read by the OpenCV driver through ``camera_device:=URL``), and scores
tool0's distance from the ball's reach point (:mod:`simreal_ros.jobs.visual_episodes`).

A locomotion policy (a spec whose robot has a floating base, ``simreal_quad_walk``) is
evaluated by :mod:`simreal_ros.jobs.locomotion` instead (in-process,
:mod:`simreal_ros.policy.locomotion_eval`): seeded 20 s episodes with pushes, forward 0.4 m/s
then turning, on ``--engine`` (``--backend sim``) or on both engines side by side
(``--backend sim2sim``: each engine's metrics, and PyBullet's success rate and tracking error
as ratios of MuJoCo's); ``--backend real`` runs the same episodes on the virtual legged robot
over ROS, exactly as on hardware, next to MuJoCo's (:mod:`simreal_ros.jobs.locomotion_real`:
``simreal emulate`` with ``--reality``, the servo and IMU drivers and the policy node,
commands on ``cmd_vel``, pushes and the ground truth from the emulator's hidden world).
``twin`` is refused for it.

Episodes are chained: each starts where the previous one ended (the first at the default
pose, after the policy's ramp). Times are measured on the ``joint_states`` stamps (ROS clock),
so sim-time and lockstep runs report sim seconds.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass, field
import math
import time
from typing import Any, Callable, Mapping

import numpy as np
import numpy.typing as npt

from simreal_ros.core.robot import load_robot
from simreal_ros.errors import LaunchError, SimrealError
from simreal_ros.gap.tracking import tracking_summary
from simreal_ros.jobs.visual_episodes import (
    OBJECT,
    SCENE,
    ReachScore,
    episode_placements,
    summarize_visual,
)
from simreal_ros.policy.spec import load_policy_spec
from simreal_ros.report.eval_results import summarize
from simreal_ros.sim.bridge_config import ENGINES

F64 = npt.NDArray[np.float64]
#: the policy node's /diagnostics values a result reports
DIAG_KEYS = ('compute_p99_ms', 'model_p99_ms', 'period_err_p99_ms', 'deadline_misses',
             'rejected_outputs', 'stale_holds', 'clipped_actions', 'commands_published',
             'image_age_ms', 'inference_p50_ms', 'inference_p99_ms')
BACKENDS = ('sim', 'sim2sim', 'real', 'twin')
#: Number settings checked by EvalSettings: (field, option in errors, must be > 0).
_CHECKED = (('tolerance_rad', '--tolerance', True), ('goal_timeout_s', '--timeout', True),
            ('dwell_s', 'dwell_s', False), ('goal_margin_rad', 'goal_margin_rad', False),
            ('start_timeout_s', 'start_timeout_s', True))


@dataclass(frozen=True)
class EvalSettings:
    """What ``simreal eval`` runs."""

    backend: str = 'sim'
    engine: str = ENGINES[0]
    policy: str = 'simreal_arm_reach'
    episodes: int = 20
    seed: int = 0
    tolerance_rad: float = 0.05
    dwell_s: float = 0.2
    goal_timeout_s: float = 5.0
    goal_margin_rad: float = 0.25
    start_timeout_s: float = 60.0
    reality: str = ''
    launch_args: dict[str, str] = field(default_factory=dict)
    #: locomotion: seconds per episode and the pushes' peak force (N)
    episode_s: float = 20.0
    push_force_n: float = 8.0

    def __post_init__(self) -> None:
        """Fail early, naming the ``simreal eval`` option, on values no episode can use."""
        if self.backend not in BACKENDS:
            raise SimrealError(f'--backend {self.backend!r}: expected one of {BACKENDS}')
        if self.engine not in ENGINES:
            raise SimrealError(f'--engine {self.engine!r}: expected one of {ENGINES}')
        if isinstance(self.episodes, bool) or not isinstance(self.episodes, int) \
                or self.episodes < 1:
            raise SimrealError(f'--episodes {self.episodes!r}: expected an integer >= 1')
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise SimrealError(f'--seed {self.seed!r}: expected an integer >= 0')
        if self.reality and (self.backend not in ('real', 'twin')
                             or 'port' in self.launch_args):
            # the reality is the emulator's; a sim or a real port has none to set
            raise SimrealError(f'--reality {self.reality!r}: only for the virtual servo bus '
                               f'(--backend real or twin, without port:=)')
        for name, flag, positive in _CHECKED:
            v = getattr(self, name)
            ok = not isinstance(v, bool) and isinstance(v, (int, float)) \
                and math.isfinite(v) and (v > 0 if positive else v >= 0)
            if not ok:
                raise SimrealError(f'{flag} {v!r}: expected a finite number '
                                   + ('> 0' if positive else '>= 0'))


def episode_goals(robot_name: str, seed: int, episodes: int, margin_rad: float) -> np.ndarray:
    """Return the seeded goals (robot joint order) of ``episodes`` episodes."""
    from simreal_ros.sim.goals import GoalSampler
    sampler = GoalSampler(load_robot(robot_name), margin_rad=margin_rad)
    return sampler.sample(np.random.default_rng(seed), episodes)


def check_visual(s: EvalSettings) -> None:
    """Refuse what a visuomotor evaluation cannot run: the eval must place the ball itself."""
    if s.backend not in ('sim', 'real'):
        raise SimrealError(f'--backend {s.backend}: a policy with image terms ({s.policy}) is '
                           f'evaluated on sim or real (the virtual robot)')
    if s.backend == 'real' and 'port' in s.launch_args:
        raise SimrealError(f'port:={s.launch_args["port"]}: on a real robot simreal eval cannot '
                           f'place the ball of {s.policy}; leave out port:= to evaluate on the '
                           f'virtual robot (simreal emulate --camera --scene {SCENE})')
    if s.launch_args.get('scene', SCENE) != SCENE:
        raise SimrealError(f'scene:={s.launch_args["scene"]}: {s.policy} is evaluated in the '
                           f'scene its ball is in, {SCENE}')


def plan_args(s: EvalSettings, port: str = '', camera_url: str = '',
              visual: bool = False) -> dict[str, str]:
    """Return the planner arguments of an evaluation run.

    ``visual``: the policy sees cameras: the sim renders the ball's scene, the real backend
    reads the virtual robot's camera at ``camera_url``.
    """
    args = {'backend': s.backend, 'engine': s.engine, 'policy': s.policy,
            'policy_autostart': 'true', 'seed': str(s.seed), **s.launch_args}
    if visual and s.backend == 'sim':
        args.setdefault('scene', SCENE)
    if camera_url:
        args.setdefault('camera_device', camera_url)
    if 'robot' not in args:
        # the policy's own arm unless robot:= says otherwise (the planner names a mismatch);
        # a spec that does not load is left to the planner, which names the reason
        with contextlib.suppress(SimrealError):
            args['robot'] = load_policy_spec(s.policy).robot
    if s.backend in ('real', 'twin'):
        args.setdefault('port', port or '/dev/null')
    return args


def policy_diag(diags: list[tuple[int, Any]]) -> dict[str, str]:
    """Return the newest policy status's key/values of the collected /diagnostics."""
    for _t, arr in reversed(diags):
        for st in arr.status:
            if st.name.endswith(': policy'):
                return {kv.key: kv.value for kv in st.values}
    return {}


class EvalStack:
    """The launched nodes plus the measuring client; stops everything on exit."""

    def __init__(self, nodes: list[Any], env: Mapping[str, str], state_topic: str,
                 log: Callable[[str], None]) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from sensor_msgs.msg import JointState

        from simreal_ros.bringup.launcher import Launcher
        from simreal_ros.ros import messages, qos
        from simreal_ros.ros.client import RosClient
        self.lines: list[str] = []
        self.launcher = Launcher(nodes, env, echo=self.lines.append)
        self.client = RosClient(int(env['ROS_DOMAIN_ID']), 'simreal_eval')
        # state_topic '': the caller measures elsewhere (a legged robot's ground truth comes
        # from the emulator): no 100-200 Hz callbacks in this process beside the stack's
        self.states: list[tuple[int, Any]] = \
            self.client.collect(JointState, state_topic) if state_topic else []
        self.commands: list[tuple[int, Any]] = \
            self.client.collect(JointState, 'joint_commands') if state_topic else []
        self.diags = self.client.collect(DiagnosticArray, '/diagnostics', qos.DIAGNOSTICS)
        # The newest state's stamp, taken apart from the deep collection above: a lockstep sim
        # runs as fast as the bridge and the policy answer each other (about 650 states/s
        # here), faster than this process takes the collected messages under load, so the
        # collected states lag the live sim (by 20 s of sim time, measured next to two busy
        # loops). An episode starts at the live stamp its goal is sent at, never at the next
        # collected state.
        self._live_ns = -1
        self._stamp_ns = messages.stamp_to_ns
        if state_topic:
            self.client.node.create_subscription(JointState, state_topic, self._on_live,
                                                 qos.IMAGE_INPUT)
        self.goal_pub = self.client.publisher(JointState, 'goal')
        self.log = log
        try:
            self.launcher.start()  # stops what it started when it fails
        except BaseException:
            self.client.close()
            raise

    def _on_live(self, msg: Any) -> None:
        stamp = self._stamp_ns(msg.header.stamp)
        with self.client.lock:
            self._live_ns = max(self._live_ns, stamp)

    def live_stamp(self, timeout_s: float = 10.0) -> int:
        """Return the newest state stamp the live sim has published (waits for the first)."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self.client.lock:
                if self._live_ns >= 0:
                    return self._live_ns
            self.check_alive()
            if time.monotonic() > deadline:
                raise LaunchError(f'no joint_states within {timeout_s} s')
            time.sleep(0.01)

    def check_alive(self) -> None:
        """LaunchError (with the last output) when a launched node has exited."""
        for spec, proc in self.launcher.procs:
            rc = proc.poll()
            if rc is not None:
                tail = '\n'.join(self.lines[-15:])
                raise LaunchError(f'{spec.fqn} exited with code {rc} during the evaluation:\n'
                                  f'{tail}')

    def close(self) -> None:
        """Stop the nodes and the client."""
        try:
            self.launcher.stop('evaluation finished')
        finally:
            self.client.close()

    def __enter__(self) -> EvalStack:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _episode(stack: EvalStack, names: list[str], goal: np.ndarray, s: EvalSettings,
             stamp_of: Callable[[Any], int]) -> dict[str, Any]:
    """Send ``goal``; score the states stamped from then on (:meth:`EvalStack.live_stamp`)."""
    from simreal_ros.ros import messages
    start_ns = stack.live_stamp()
    stack.goal_pub.publish(messages.joint_state(names, 0, goal))
    last_send = time.monotonic()
    inside_since: int | None = None
    reached_ns: int | None = None
    end_ns = start_ns
    wall_deadline = time.monotonic() + 10.0 * s.goal_timeout_s + 30.0
    last_q = None
    with stack.client.lock:  # the collected states before the goal are not this episode's
        k = len(stack.states)
        while k > 0 and stamp_of(stack.states[k - 1][1]) >= start_ns:
            k -= 1
    done = False
    while not done and time.monotonic() < wall_deadline:
        if time.monotonic() - last_send > 0.5:  # re-sent: a late subscriber still gets it
            stack.goal_pub.publish(messages.joint_state(names, 0, goal))
            last_send = time.monotonic()
        with stack.client.lock:
            batch = stack.states[k:]
        k += len(batch)
        for _t, msg in batch:
            stamp = stamp_of(msg)
            if stamp < start_ns:
                continue
            end_ns = stamp
            q = np.asarray(msg.position, dtype=np.float64)
            last_q = q
            err = float(np.max(np.abs(q - goal)))
            if err < s.tolerance_rad:
                inside_since = stamp if inside_since is None else inside_since
                if stamp - inside_since >= s.dwell_s * 1e9:
                    reached_ns = inside_since
                    done = True
                    break
            else:
                inside_since = None
            if stamp - start_ns >= s.goal_timeout_s * 1e9:
                done = True
                break
        if not done:
            stack.check_alive()
            time.sleep(0.01)
    with stack.client.lock:
        states = [m for _t, m in stack.states if start_ns <= stamp_of(m) <= end_ns]
        commands = [m for _t, m in stack.commands if start_ns <= stamp_of(m) <= end_ns]
    final = float(np.max(np.abs(last_q - goal))) if last_q is not None else float('nan')
    track = tracking_summary(
        names, [stamp_of(m) for m in states], [list(m.position) for m in states],
        [stamp_of(m) for m in commands], [list(m.position) for m in commands])
    rmse = [j['rmse'] for j in track['joints'].values() if not math.isnan(j['rmse'])]
    return {'goal': [round(float(x), 6) for x in goal], 'success': reached_ns is not None,
            'time_to_goal_s': (reached_ns - start_ns) / 1e9 if reached_ns is not None
            else None,
            'final_error_rad': final,
            'tracking_rmse_rad': float(np.sqrt(np.mean(np.square(rmse)))) if rmse
            else float('nan')}


def _visual_episode(stack: EvalStack, place: Callable[[F64], None], task: Any, obj: F64,
                    goal: F64, s: EvalSettings, stamp_of: Callable[[Any], int]
                    ) -> dict[str, Any]:
    """Place the ball, then score the states stamped from then on (jobs/visual_episodes.py)."""
    start_ns = stack.live_stamp()
    place(obj)
    with stack.client.lock:
        k = len(stack.states)
    score = ReachScore(task, obj, s.goal_timeout_s, task.geo.tolerance_m, s.dwell_s)
    wall_deadline = time.monotonic() + 10.0 * s.goal_timeout_s + 30.0
    while not score.done and time.monotonic() < wall_deadline:
        with stack.client.lock:
            batch = stack.states[k:]
        k += len(batch)
        for _t, msg in batch:
            stamp = stamp_of(msg)
            if stamp >= start_ns and score.add(stamp, np.asarray(msg.position,
                                                                 dtype=np.float64)):
                break
        stack.check_alive()
        time.sleep(0.01)
    return score.result(goal)


def _bridge_placer(stack: EvalStack, nodes: list[Any]) -> Callable[[F64], None]:
    """Place the ball through the sim bridge's ``objects.target.position`` parameter."""
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter

    from simreal_ros.sim.placement import parameter_name
    bridge = next(n for n in nodes if n.kind == 'sim_bridge')

    def place(obj: F64) -> None:
        req = SetParameters.Request()
        req.parameters = [Parameter(parameter_name(OBJECT), Parameter.Type.DOUBLE_ARRAY,
                                    [float(x) for x in obj]).to_parameter_msg()]
        res = stack.client.call(SetParameters, f'{bridge.fqn}/set_parameters', req)
        if not res.results[0].successful:
            raise LaunchError(f'{bridge.fqn} refused to place {OBJECT}: '
                              f'{res.results[0].reason}')
    return place


def wait_for_policy(stack: EvalStack, timeout_s: float) -> None:
    """Wait until the policy node reports ``mode: running`` (after its ramp) on /diagnostics."""
    deadline = time.monotonic() + timeout_s
    while policy_diag(stack.diags).get('mode') != 'running':
        stack.check_alive()
        if time.monotonic() > deadline:
            raise LaunchError(f'the policy did not take over within {timeout_s} s '
                              f'(last diagnostics: {policy_diag(stack.diags)})')
        time.sleep(0.05)


def wait_for_goal_readers(stack: EvalStack, readers: int, timeout_s: float) -> None:
    """Wait until ``readers`` subscriptions (the policy nodes') have matched the goal publisher.

    A goal published before the policy node's subscription has matched the publisher is lost
    (volatile QoS), and the next re-send comes 0.5 s of wall time later. With
    ``timing:=lockstep`` the sim runs about 13 times faster than the wall clock, so those 0.5 s
    are 6.5 sim seconds: more than the episode's timeout.
    """
    deadline = time.monotonic() + timeout_s
    while stack.goal_pub.get_subscription_count() < readers:
        stack.check_alive()
        if time.monotonic() > deadline:
            raise LaunchError(f'the policy node did not subscribe to goal within {timeout_s} s '
                              f'({stack.goal_pub.get_subscription_count()} of {readers} '
                              'subscriptions matched)')
        time.sleep(0.01)


def _wait_for_frames(stack: EvalStack, s: EvalSettings) -> None:
    """Wait until the policy node has a camera frame (image_age_ms >= 0 on /diagnostics)."""
    deadline = time.monotonic() + s.start_timeout_s
    while float(policy_diag(stack.diags).get('image_age_ms', '-1')) < 0:
        stack.check_alive()
        if time.monotonic() > deadline:
            raise LaunchError(f'the policy node got no camera frame within '
                              f'{s.start_timeout_s} s (last diagnostics: '
                              f'{policy_diag(stack.diags)})')
        time.sleep(0.05)


def run_eval(s: EvalSettings, env: Mapping[str, str], log: Callable[[str], None] = print
             ) -> dict[str, Any]:
    """Start the stack, run the episodes, stop the stack; return settings, metrics, episodes."""
    from simreal_ros.bringup.planner import plan
    from simreal_ros.ros import messages
    try:
        visual = bool(load_policy_spec(s.policy).images)
    except SimrealError:  # the planner names the reason
        visual = False
    if visual:
        check_visual(s)
    nodes = plan(plan_args(s, visual=visual))  # fails with the planner's reason first
    spec = load_policy_spec(s.policy)
    robot = load_robot(spec.robot)
    with contextlib.ExitStack() as resources:  # everything started is stopped on any error
        emulator = None
        if s.backend in ('real', 'twin') and 'port' not in s.launch_args:
            from simreal_ros.bringup.plan_realtime import EMULATOR_RT_PRIORITY
            from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess
            # realtime:=true: the virtual bus stands for servo hardware, never preempted
            rt = s.launch_args.get('realtime', 'false').lower() == 'true'
            emulator = resources.enter_context(EmulatorProcess(
                robot=spec.robot, reality=s.reality, camera=visual,
                scene=SCENE if visual else '', rt_priority=EMULATOR_RT_PRIORITY if rt else 0))
            nodes = plan(plan_args(s, port=emulator.port, visual=visual,
                                   camera_url=emulator.camera_urls[0] if visual else ''))
        state_topic = 'sim_a/joint_states' if s.backend == 'sim2sim' else 'joint_states'
        t0 = time.monotonic()
        stack = resources.enter_context(EvalStack(nodes, env, state_topic, log))
        wait_for_policy(stack, s.start_timeout_s)
        log(f'{spec.name} running on backend {s.backend}; {s.episodes} episodes')
        episodes = []

        def stamp_of(m: Any) -> int:
            return messages.stamp_to_ns(m.header.stamp)

        if visual:
            from simreal_ros.policy.visual_task import ReachTask
            task = ReachTask(robot)
            place: Callable[[F64], None] = (
                (lambda obj: emulator.place(OBJECT, [float(x) for x in obj]))
                if emulator is not None else _bridge_placer(stack, nodes))
            _wait_for_frames(stack, s)
            for k, (obj, goal) in enumerate(episode_placements(task, s.seed, s.episodes)):
                ep = _visual_episode(stack, place, task, obj, goal, s, stamp_of)
                episodes.append(ep)
                log(f'  episode {k + 1}/{s.episodes}: ball at '
                    f'({obj[0]:.3f}, {obj[1]:.3f}) m: '
                    + (f'reached in {ep["time_to_goal_s"]:.2f} s' if ep['success']
                       else f'not reached (error {ep["final_error_m"] * 100:.1f} cm)'))
        else:
            wait_for_goal_readers(stack, sum(n.kind == 'policy' for n in nodes),
                                  s.start_timeout_s)
            goals = episode_goals(robot.name, s.seed, s.episodes, s.goal_margin_rad)
            for k, goal in enumerate(goals):
                ep = _episode(stack, robot.joint_names, goal, s, stamp_of)
                episodes.append(ep)
                log(f'  episode {k + 1}/{s.episodes}: '
                    + (f'reached in {ep["time_to_goal_s"]:.2f} s' if ep['success']
                       else f'not reached (error {ep["final_error_rad"]:.3f} rad)'))
        diag = policy_diag(stack.diags)
    settings = asdict(s)
    return {'settings': settings, 'task': 'visual_reach' if visual else 'joint_goal',
            'metrics': summarize_visual(episodes) if visual else summarize(episodes),
            'episodes': episodes,
            'policy_diagnostics': {k: diag.get(k) for k in DIAG_KEYS},
            'wall_time_s': time.monotonic() - t0}
