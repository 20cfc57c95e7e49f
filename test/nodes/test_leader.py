"""Teleop over two virtual servo buses: a scripted leader arm drives the follower's driver.

The leader is ``simreal emulate --role leader`` (its joints moved by a scripted operator), read
by the leader node through the real SDK; the follower is the usual virtual bus behind the real
Dynamixel driver. Everything between them is DDS.
"""

from __future__ import annotations

import json
from pathlib import Path
import re
import signal
import subprocess
import sys
import time

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
import numpy as np
import pyarrow.parquet as pq
import pytest
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger

from simreal_ros.bag import BagReader
from simreal_ros.core.robot import load_robot
from simreal_ros.gap.metrics import Series, estimate_lag_ns, pair
from simreal_ros.hardware.dynamixel.bus import DynamixelBus
from simreal_ros.hardware.emulator.operator import Operator, OperatorConfig
from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess
from simreal_ros.ros import messages
from simreal_ros.sim.engines import make_sim
from simreal_ros.teleop.control import LeaderConfig, leader_mapping
from simreal_ros.teleop.quality import TeleopThresholds, lag_and_tracking, read_meta

pytestmark = pytest.mark.ros
REPO = Path(__file__).resolve().parents[2]
ROBOT = load_robot('simreal_arm')


def leader_statuses(diags: list) -> list[tuple[int, DiagnosticStatus]]:
    return [(messages.stamp_to_ns(arr.header.stamp), st) for _t, arr in list(diags)
            for st in arr.status if st.name.endswith('teleop leader')]


def state_of(st: DiagnosticStatus) -> str:
    return {kv.key: kv.value for kv in st.values}['state']


def value(st: DiagnosticStatus, key: str) -> str:
    return {kv.key: kv.value for kv in st.values}[key]


def stamp(msg: JointState) -> int:
    return messages.stamp_to_ns(msg.header.stamp)


def series(samples: list, t0: int = 0, t1: int = 2**62) -> Series:
    picked = [m for _t, m in list(samples) if t0 <= stamp(m) <= t1]
    return Series.from_samples(ROBOT.joint_names, [stamp(m) for m in picked],
                               [list(m.position) for m in picked])


class Graph:
    """The collected topics of one teleop test."""

    def __init__(self, ros_client) -> None:
        self.client = ros_client
        self.states = ros_client.collect(JointState, 'joint_states')
        self.leader = ros_client.collect(JointState, 'leader/joint_states')
        self.commands = ros_client.collect(JointState, 'joint_commands')
        self.diags = ros_client.collect(DiagnosticArray, '/diagnostics')

    def wait_state(self, state: str, node, timeout: float = 40.0) -> int:
        """Wait until the leader node reports ``state``; return the diagnostics' stamp."""
        try:
            self.client.wait_for(lambda: any(state_of(st) == state
                                             for _s, st in leader_statuses(self.diags)),
                                 timeout, f'leader state {state}')
        except TimeoutError as exc:
            raise TimeoutError(f'{exc}; leader output:\n{node.output()}') from None
        return next(s for s, st in leader_statuses(self.diags) if state_of(st) == state)


@pytest.fixture
def follower(ros_env, tmp_path):
    with EmulatorProcess(link=tmp_path / 'ttyFollower', env=ros_env) as emu:
        yield emu


def start_teleop(start_node, follower_port: str, leader_port: str, **params: object):
    drv = start_node('dynamixel_driver', port=follower_port, rate_hz=200.0)
    leader = start_node('leader', port=leader_port, **params)
    return drv, leader


def test_follower_tracks_the_leader_after_a_slow_blend(follower, ros_env, tmp_path, start_node,
                                                       ros_client) -> None:
    """The follower (sagged under gravity before its driver started) is blended to the
    leader, then follows a chirp: small lag-aligned error, positive lag below 0.2 s."""
    g = Graph(ros_client)
    with EmulatorProcess(link=tmp_path / 'ttyLeader', env=ros_env, role='leader',
                         operator='chirp,amplitude=0.25,f_max_hz=0.6,cue=1') as lead:
        # leader_timeout_s 1: at a load average of 7 the leader thread stalled > 0.1 s (the
        # default), a "loss" that restarts the blend; engagements == 1 below checks none
        _drv, node = start_teleop(start_node, follower.port, lead.port, start_mode='blend',
                                  blend_speed_rad_s=0.5, diagnostics_period_s=0.5,
                                  leader_timeout_s=1.0, deadman_on_start=False)
        # the deadman is pressed once this client hears the leader node, so that it receives
        # the whole blend (a blend started at once can be over before DDS matched the client)
        ros_client.wait_for(lambda: len(g.leader) > 10
                            and ros_client.node.count_publishers('/joint_commands') > 0, 30,
                            'the leader node matched')
        assert g.commands == []  # deadman released: nothing is sent
        assert ros_client.call(SetBool, '/leader/deadman', SetBool.Request(data=True)).success
        g.wait_state('tracking', node)
        # the blend ran first (its start, clamped into the limits, is a unit test)
        assert 'blending at 0.5 rad/s' in node.output()
        done = next(line for line in node.output().splitlines() if 'blend done' in line)
        t_done = int(float(done.split('] [')[1].split(']')[0]) * 1e9)  # the log line's stamp
        blend = [m for _t, m in g.commands if stamp(m) < t_done - 20_000_000]
        assert len(blend) > 20
        moved = np.abs(np.subtract(blend[-1].position, blend[0].position)).max()
        speed = moved / ((stamp(blend[-1]) - stamp(blend[0])) / 1e9)
        assert 0.45 < speed < 0.525  # at blend_speed_rad_s (0.5) on the farthest joint
        t_move = lead.start_operator()  # the leader held still through the blend
        ros_client.wait_for(lambda: g.leader and stamp(g.leader[-1][1]) > t_move + 8e9, 30,
                            '8 s of tracking')
        assert state_of(leader_statuses(g.diags)[-1][1]) == 'tracking'
        assert value(leader_statuses(g.diags)[-1][1], 'engagements') == '1'
    leader, states = series(g.leader, t_move + int(1e9)), series(g.states, t_move + int(1e9))
    # the operator really moved the leader (the chirp: up to 0.5 rad from home)
    assert np.ptp(leader.position, axis=0).min() > 0.2
    lag = estimate_lag_ns(leader, states)
    assert 0 < lag < 200e6, f'lag {lag / 1e6:.1f} ms'
    aligned = Series(states.names, states.stamps - lag, states.position, states.velocity)
    err = pair(leader, aligned).position_error
    rms = np.sqrt(np.nanmean(err ** 2, axis=0))
    print(f'teleop tracking: lag {lag / 1e6:.1f} ms, rms after alignment {np.round(rms, 4)} '
          f'rad')
    # 0.023 rad (shoulder_pitch, against gravity) measured on a quiet machine, 0.06 under a
    # load average of 10 on its 2 cores; a follower not tracking this chirp (0.3 rad RMS
    # motion) would be near 0.3
    assert rms.max() < 0.1, f'rms after lag alignment {np.round(rms, 4)} rad'
    # every command is inside the limits and is the leader's reading (1:1 mapping), one per
    # fresh reading: no stamp twice
    stamps = sorted(stamp(m) for _t, m in g.commands)
    assert len(set(stamps)) == len(stamps)
    cmd = np.array([m.position for _t, m in g.commands])
    assert np.all(cmd >= ROBOT.lower) and np.all(cmd <= ROBOT.upper)
    by_stamp = {stamp(m): m.position for _t, m in g.leader}
    tracked = [m for _t, m in g.commands if stamp(m) > t_move and stamp(m) in by_stamp]
    assert len(tracked) > 100
    assert all(np.array_equal(m.position, by_stamp[stamp(m)]) for m in tracked)


class LaunchLog:
    """A ``simreal launch`` whose output goes to a file (``output()`` as NodeProcess has)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def output(self) -> str:
        return self.path.read_text(errors='replace')


#: a chirp whose phase wraps at 10 * 2 pi (0.3 -> 0.7 Hz over 10 s): the leader never jumps;
#: it starts on cue, once the launch tracks (it held still for a fixed 15 s before)
SO101_OPERATOR = 'chirp,amplitude=0.25,f_min_hz=0.3,f_max_hz=0.7,cue=1'


# e2e: a whole `simreal launch` with two emulators for 25 s; the leader node's behaviour is the
# ros tier's other tests, on every distribution. timing: the follower's tracking RMS after lag
# alignment is held to 0.1 rad, and beside the other worker in CI (one core busy) it read
# 0.107 rad on one joint
@pytest.mark.e2e
@pytest.mark.timing
def test_so101_leader_drives_a_worn_so101_follower_through_the_launch(ros_env, ros_client,
                                                                       tmp_path) -> None:
    """LeRobot's SO-101 leader (STS3215, torque off) on the virtual STS bus drives an SO-101
    whose hidden reality is so101_worn, through ``simreal launch backend:=real robot:=so101
    teleop:=leader leader_robot:=so101``: every joint, the gripper too, follows the leader."""
    so101 = load_robot('so101')
    g = Graph(ros_client)
    log = LaunchLog(tmp_path / 'launch.log')
    with EmulatorProcess(link=tmp_path / 'ttyFollower', robot='so101', reality='so101_worn',
                         env=ros_env) as fol, \
            EmulatorProcess(link=tmp_path / 'ttyLeader', robot='so101', role='leader',
                            operator=SO101_OPERATOR, env=ros_env) as lead, \
            log.path.open('w') as out:
        proc = subprocess.Popen(
            [sys.executable, '-m', 'simreal_ros', 'launch', 'backend:=real', 'robot:=so101',
             f'port:={fol.port}', 'teleop:=leader', 'leader_robot:=so101',
             f'leader_port:={lead.port}', 'episodes:=false'],
            env=ros_env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        try:
            g.wait_state('tracking', log, timeout=90)
            # the leader held still until now; the chirp ramps in over 1 s
            t0 = lead.start_operator() + int(2e9)
            t1 = t0 + int(6e9)
            ros_client.wait_for(lambda: g.leader and stamp(g.leader[-1][1]) > t1, 60,
                                '6 s of leader motion while tracking')
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
    assert proc.returncode == 0, log.output()[-3000:]
    assert '[leader' in log.output() and 'leader so101 on' in log.output()

    def window(samples: list) -> Series:
        picked = [m for _t, m in list(samples) if t0 <= stamp(m) <= t1]
        return Series.from_samples(so101.joint_names, [stamp(m) for m in picked],
                                   [list(m.position) for m in picked])

    leader, states = window(g.leader), window(g.states)
    assert np.ptp(leader.position, axis=0).min() > 0.2  # every joint moved, the gripper too
    lag_ns, rms = lag_and_tracking(leader, states)
    print(f'so101 teleop: lag {lag_ns / 1e6:.1f} ms, rms after alignment {np.round(rms, 4)}')
    th = TeleopThresholds()
    assert 0 < lag_ns < th.max_lag_s * 1e9, f'lag {lag_ns / 1e6:.1f} ms'
    # the episode check's tracking limit (0.1 rad, twice the 0.05 target, so a loaded
    # host's stalls do not fail it): measured 0.005-0.053 rad per joint with a quiet leader,
    # the largest shoulder_lift's gravity droop (docs/teleop.md); a follower that did not
    # follow this chirp (0.5 rad peak to peak) would be near 0.2
    assert rms.max() < th.max_tracking_rms_rad, f'rms after lag alignment {np.round(rms, 4)}'


def test_deadman_stops_streaming_at_once_and_the_follower_holds(
        follower, ros_env, tmp_path, start_node, ros_client) -> None:
    g = Graph(ros_client)
    with EmulatorProcess(link=tmp_path / 'ttyLeader', env=ros_env, role='leader',
                         operator='chirp,amplitude=0.25,start_s=2') as lead:
        _drv, node = start_teleop(start_node, follower.port, lead.port, start_mode='blend',
                                  blend_speed_rad_s=1.5, leader_timeout_s=1.0)
        g.wait_state('tracking', node)
        res = ros_client.call(SetBool, '/leader/deadman', SetBool.Request(data=False))
        released_ns = time.time_ns()
        assert res.success and res.message == 'deadman released: command streaming stopped'
        ros_client.wait_for(lambda: stamp(g.leader[-1][1]) > released_ns + 3e9, 20,
                            '3 s of leader motion after the release')
        statuses = leader_statuses(g.diags)
        assert state_of(statuses[-1][1]) == 'waiting'
        assert statuses[-1][1].message == 'waiting: deadman released'
    # no command produced after the service answered
    late = [stamp(m) for _t, m in g.commands if stamp(m) > released_ns]
    assert late == []
    # the follower holds (after finishing the last goal) while the leader keeps moving
    hold = series(g.states, released_ns + int(0.5e9), released_ns + int(3e9))
    moved = series(g.leader, released_ns + int(0.5e9), released_ns + int(3e9))
    assert np.ptp(moved.position, axis=0).max() > 0.1
    assert np.ptp(hold.position, axis=0).max() < 0.01


def test_start_refuses_a_far_away_follower(follower, ros_env, tmp_path, start_node,
                                           ros_client) -> None:
    g = Graph(ros_client)
    with EmulatorProcess(link=tmp_path / 'ttyLeader', env=ros_env, role='leader',
                         operator='waypoints,offset_rad=0.6,start_s=1000') as lead:
        _drv, node = start_teleop(start_node, follower.port, lead.port, start_mode='wait',
                                  start_tolerance_rad=0.1)
        t_far = g.wait_state('far', node)
        ros_client.wait_for(lambda: len([m for _t, m in g.leader if stamp(m) > t_far]) > 200,
                            20, '200 leader readings while refused')
        st = leader_statuses(g.diags)[-1][1]
        assert (state_of(st), st.level) == ('far', DiagnosticStatus.WARN)
        assert float(value(st, 'distance_rad')) > 0.5
    assert g.commands == []
    assert 'start refused: follower' in node.output()
    # Ctrl-C: the leader thread stops without an exception (it printed one on every launch
    # stop, publishing on the invalidated context), and the node exits 0
    rc = node.stop()
    log = node.log_path.read_text()
    assert 'Exception in thread leader' not in log
    assert rc == 0, log[-3000:]


def test_leader_unplug_holds_the_follower_and_replug_restarts_safely(
        follower, ros_env, tmp_path, start_node, ros_client) -> None:
    g = Graph(ros_client)
    with EmulatorProcess(link=tmp_path / 'ttyLeader', env=ros_env, role='leader',
                         operator='chirp,amplitude=0.25,start_s=2',
                         faults='unplug_at=9,replug_at=12') as lead:
        _drv, node = start_teleop(start_node, follower.port, lead.port, start_mode='blend',
                                  blend_speed_rad_s=1.5, leader_timeout_s=0.3)
        g.wait_state('tracking', node)
        lead.wait_for_line('unplugged', 30)
        t_unplug = lead.line_time_ns('unplugged')
        # the loss the unplug caused (a load stall may have caused an earlier one)
        ros_client.wait_for(lambda: any(
            state_of(st) == 'leader_lost' and s_ > t_unplug - 50_000_000
            for s_, st in leader_statuses(g.diags)), 20, 'leader_lost after the unplug')
        t_lost, lost = next((s_, st) for s_, st in leader_statuses(g.diags)
                            if state_of(st) == 'leader_lost' and s_ > t_unplug - 50_000_000)
        assert lost.level == DiagnosticStatus.ERROR
        lead.wait_for_line('replugged', 10)
        replug_ns = lead.line_time_ns('replugged')
        ros_client.wait_for(lambda: any(state_of(st) == 'tracking' and s_ > replug_ns
                                        for s_, st in leader_statuses(g.diags)),
                            30, 'tracking again after the replug')
    # nothing was sent between the loss and the replug
    assert [m for _t, m in g.commands if t_lost < stamp(m) < replug_ns] == []
    hold = series(g.states, t_lost + int(0.5e9), replug_ns)
    assert len(hold) > 50  # 2.5 s of states: 125 at a load average of 7 on the 2 cores
    assert np.ptp(hold.position, axis=0).max() < 0.01
    assert 'leader port lost' in node.output() and 'leader reconnected' in node.output()


BUTTON_OPERATOR = ('chirp,amplitude=0.25,start_s=8,button_id=6,button_press_s=7,'
                   'button_release_s=3')
GRIPPER = {'gripper_joint': 'wrist_roll', 'gripper_trigger_open_rad': 0.0,
           'gripper_trigger_closed_rad': 0.4, 'gripper_open_rad': -0.3,
           'gripper_closed_rad': 0.3}


def logged_stamps(output: str, event: str) -> list[int]:
    """Stamps of the leader readings at which the node logged ``event``."""
    return [int(s) for s in re.findall(re.escape(event) + r' \(leader reading stamped (\d+) ns\)',
                                       output)]


def test_leader_button_stops_in_its_cycle_and_resumes_through_the_start_with_a_gripper(
        follower, ros_env, tmp_path, start_node, ros_client) -> None:
    """The scripted operator releases the leader's button (servo 6, Indirect Data 1) for 3 s
    in every 10 s while the chirp goes on; wrist_roll plays a gripper driven by its trigger."""
    # the chirp's period is the button's (10 s): in every window the leader moves >= 0.4 rad
    # (mapped) between the release and the press, so the press must go through the blend.
    # The chirp jumps where its period wraps (start_s + 10 k): start_s 8 puts that inside
    # the releases, not at a press (where the joints' read and the button's, one transaction
    # apart, could fall on either side of it: 0.13 rad instead of 0.6 was seen that way)
    op = Operator(ROBOT, OperatorConfig.parse(BUTTON_OPERATOR))
    mapping = leader_mapping(LeaderConfig(port='p', **GRIPPER), ROBOT, ROBOT)
    skew = np.linspace(-0.1, 0.1, 9)  # a read up to 0.1 s either side of the button's edge
    moved = [np.abs(mapping.map(op.position(10 * k + 7 + a)) -
                    mapping.map(op.position(10 * k + 10 + b))).max()
             for k in range(12) for a in skew for b in skew]
    assert min(moved) > 0.4
    g = Graph(ros_client)
    released, pressed = 'deadman button released: command streaming stopped', \
        'deadman button pressed: start check, then streaming'
    with EmulatorProcess(link=tmp_path / 'ttyLeader', env=ros_env, role='leader',
                         operator=BUTTON_OPERATOR) as lead:
        _drv, node = start_teleop(start_node, follower.port, lead.port, start_mode='blend',
                                  blend_speed_rad_s=1.5, leader_timeout_s=1.0, button_id=6,
                                  **GRIPPER)
        t_track = g.wait_state('tracking', node)
        ros_client.wait_for(lambda: any(s_ > t_track for s_ in logged_stamps(node.output(),
                                                                             released)),
                            40, 'a button release while tracking')
        t_release = next(s_ for s_ in logged_stamps(node.output(), released) if s_ > t_track)
        ros_client.wait_for(lambda: any(s_ > t_release for s_ in logged_stamps(node.output(),
                                                                               pressed)),
                            20, 'the button pressed again')
        t_press = next(s_ for s_ in logged_stamps(node.output(), pressed) if s_ > t_release)
        ros_client.wait_for(lambda: any(state_of(st) == 'tracking' and s_ > t_press
                                        for s_, st in leader_statuses(g.diags)),
                            20, 'tracking again after the press')
        t_track2 = next(s_ for s_, st in leader_statuses(g.diags)
                        if state_of(st) == 'tracking' and s_ > t_press)
        ros_client.wait_for(lambda: stamp(g.leader[-1][1]) > t_press + 6e9, 20,
                            '6 s of leader readings after the press')
        output = node.output()
    commands = sorted(((stamp(m), m) for _t, m in list(g.commands)), key=lambda c: c[0])
    # released: no command for the reading that saw it, nor after it until the press; the
    # stream went on up to the reading before (tracking)
    assert [s_ for s_, _m in commands if t_release <= s_ < t_press] == []
    assert max(s_ for s_, _m in commands if s_ < t_release) > t_track
    assert any(st.message == 'waiting: deadman button released' and t_release <= s_ < t_press
               for s_, st in leader_statuses(g.diags))
    # pressed: the start check ran (the next event is the blend), and the first command is
    # where the follower held, not the leader >= 0.4 rad away (less the follower's tracking
    # error when it stopped)
    after_press = output[output.index(f'{pressed} (leader reading stamped {t_press} ns)'):]
    assert 'blending at 1.5 rad/s' in after_press.splitlines()[1], output
    first = np.array(next(m.position for s_, m in commands if s_ >= t_press))
    held = np.array([m.position for _t, m in g.states if stamp(m) < t_press][-1])
    leader_at_press = [m.position for _t, m in g.leader if stamp(m) <= t_press][-1]
    assert np.abs(first - held).max() < 0.02
    away = np.abs(first - mapping.map(np.array(leader_at_press))).max()
    print(f'first command after the press: {np.abs(first - held).max():.4f} rad from the held '
          f'follower, {away:.3f} rad from the leader')
    assert away > 0.25
    # tracking after the press (up to a next release): the command is the mapped leader,
    # wrist_roll the trigger's linear map with both stops hit
    next_release = min([s_ for s_ in logged_stamps(output, released) if s_ > t_press],
                       default=2**62)
    by_stamp = {stamp(m): np.array(m.position) for _t, m in g.leader}
    tracked = [(by_stamp[s_], np.array(m.position)) for s_, m in commands
               if t_track2 < s_ < next_release and s_ in by_stamp]
    assert len(tracked) > 100
    assert all(np.array_equal(cmd, mapping.map(lead_q)) for lead_q, cmd in tracked)
    grip = np.array([cmd[5] for _q, cmd in tracked])
    assert grip.min() == -0.3 and grip.max() == 0.3
    assert np.any((grip > -0.29) & (grip < 0.29))


class Episodes:
    """Clients of the episode services, made once: a response to a client made just before
    the call can be lost while its reader is still being matched (DDS discovery), which a
    shared 2-core machine under load made happen (a 60 s wait on a served ~/episode/stop)."""

    def __init__(self, ros_client) -> None:
        self.clients = {name: ros_client.node.create_client(Trigger, f'/episodes/episode/{name}')
                        for name in ('start', 'stop', 'discard')}

    def __call__(self, name: str) -> Trigger.Response:
        cli = self.clients[name]
        assert cli.wait_for_service(timeout_sec=30), f'no ~/episode/{name}'
        future = cli.call_async(Trigger.Request())
        deadline = time.monotonic() + 60
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.005)
        assert future.done(), f'~/episode/{name} did not answer'
        return future.result()


@pytest.mark.e2e
def test_episodes_are_cut_checked_at_stop_and_discarded(
        follower, ros_env, tmp_path, start_node, ros_client) -> None:
    """An idle episode (the operator has not started) is rejected with its reason, a moving
    one accepted, a discarded one deleted; the metadata carries task, operator and robot."""
    g = Graph(ros_client)
    directory = tmp_path / 'episodes'
    with EmulatorProcess(link=tmp_path / 'ttyLeader', env=ros_env, role='leader',
                         operator='chirp,amplitude=0.25,f_max_hz=0.6,cue=1') as lead:
        _drv, node = start_teleop(start_node, follower.port, lead.port, start_mode='blend',
                                  blend_speed_rad_s=1.5, leader_timeout_s=1.0)
        # the stream checks (drops, gaps) have their own tests (test/gap/test_quality.py);
        # this shared 2-core machine under load missed 5-20 % of the 100 Hz leader cycles and
        # stalled up to 0.24 s, which would reject every episode for drops and gaps
        eps = start_node('episodes', directory=str(directory), task='wave', operator='ada',
                         thresholds=['max_dropped_fraction=0.5', 'max_gaps=1000'])
        call = Episodes(ros_client)
        g.wait_state('tracking', node)
        # idle: the leader is held still (its chirp starts on cue, below)
        res = call('start')
        t0 = time.time_ns()
        assert res.success, res.message
        assert call('start').message == 'episode 0 is open: stop or discard it'
        ros_client.wait_for(lambda: stamp(g.commands[-1][1]) > t0 + 2.5e9, 20, '2.5 s')
        res = call('stop')
        assert res.success and res.message.startswith('episode 0 rejected: idle '), res.message
        # moving: once the chirp has run 2 s
        started = lead.start_operator()
        ros_client.wait_for(lambda: time.time_ns() > started + 2e9, 30, 'the chirp running')
        assert call('start').success
        t1 = time.time_ns()
        ros_client.wait_for(lambda: stamp(g.commands[-1][1]) > t1 + 5e9, 20, '5 s of chirp')
        res = call('stop')
        assert res.success and res.message.startswith('episode 1 accepted'), (
            res.message + eps.output())
        assert call('start').message.startswith('episode 2 started')
        assert call('discard').message == 'episode episode_0002 discarded'
    meta0 = read_meta(directory / 'episode_0000')
    meta1 = read_meta(directory / 'episode_0001')
    assert (meta0['accepted'], meta1['accepted']) == (False, True)
    assert [r.split(':')[0] for r in meta0['reasons']] == ['idle /joint_commands']
    assert (meta1['task'], meta1['operator'], meta1['robot']) == ('wave', 'ada', 'simreal_arm')
    assert meta1['reasons'] == []
    lag = next(f for f in meta1['findings'] if f['check'] == 'lag')
    assert 0 < lag['value'] < 0.2
    assert not (directory / 'episode_0002').exists()
    with BagReader(str(directory / 'episode_0001' / 'bag')) as reader:
        info = reader.info
    assert {'/joint_states', '/leader/joint_states', '/joint_commands'} <= set(info.topics)
    assert info.custom_data['episode.task'] == 'wave'
    # the export takes the accepted episode only, at the commands' rate
    out = tmp_path / 'dataset'
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'export', str(directory),
                        '--out', str(out), '--json'], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary['episodes'] == ['episode_0001']
    assert [s['episode'] for s in summary['skipped']] == ['episode_0000']
    info = json.loads((out / 'meta/info.json').read_text())
    assert info['total_episodes'] == 1 and info['fps'] == summary['fps']
    data = pq.read_table(out / 'data/chunk-000/file-000.parquet')
    assert data.num_rows == info['total_frames'] > 4 * summary['fps']
    assert set(data.column('task_index').to_pylist()) == {0}


def test_gravity_compensation_currents_arrive_and_the_held_leader_drifts_less(
        ros_env, tmp_path, start_node, ros_client) -> None:
    """The operator's hand holds the leader at home as a spring (10 N*m/rad): without
    compensation the arm sags under its weight; with 0.8 of the holding torque as current
    it sags a fifth as far. The currents read back are the ones commanded; at stop the
    leader's torque is off again."""
    hold_model = make_sim(ROBOT)
    leader = ros_client.collect(JointState, 'leader/joint_states')
    runs = {}
    with EmulatorProcess(link=tmp_path / 'ttyLeader', env=ros_env, role='leader',
                         operator='waypoints,start_s=1000,hand_stiffness_nm_rad=10') as lead:
        for compensation in (False, True):
            t0 = time.time_ns()  # this run's readings only (the node stamps with wall time)

            def readings(t0: int = t0) -> list[JointState]:
                return [m for _t, m in list(leader) if stamp(m) > t0]

            node = start_node('leader', port=lead.port, compensation=compensation,
                              gravity_fraction=0.8, max_current_a=0.5, leader_timeout_s=1.0)
            ros_client.wait_for(lambda: len(readings()) >= 60, 30, '60 leader readings')
            # from the 21st: the first reading precedes the first current write
            runs[compensation] = readings()[20:60]
            assert node.stop() == 0
        bus = DynamixelBus(ROBOT, lead.port, ROBOT.bus_baud)
        bus.open()
        try:
            bus.check_servos(2.0)
            torque = [bus.read_register(sid, 'torque_enable') for sid in range(1, 7)]
        finally:
            bus.close()
    assert torque == [0] * 6  # switched off at the node's stop
    drift = {c: np.mean([np.abs(np.subtract(m.position, ROBOT.home)).max() for m in msgs])
             for c, msgs in runs.items()}
    print(f'leader drift from the held pose: {drift[False]:.4f} rad without, '
          f'{drift[True]:.4f} rad with compensation')
    # 0.716 N*m holds shoulder_pitch at home: 0.072 rad of sag on the 10 N*m/rad hand
    assert drift[False] > 0.05
    assert drift[True] < 0.3 * drift[False]
    # the present currents (effort) are what the node commanded for the pose it read
    # (0.8 * holding torque, clamped to 0.5 A * 1.78 N*m/A), to a current register (2.69 mA)
    assert all(not np.any(m.effort) for m in runs[False])
    for m in runs[True]:
        want = np.clip(0.8 * hold_model.probe(np.array(m.position)).gravity, -0.89, 0.89)
        assert np.abs(np.subtract(m.effort, want)).max() < 0.015
    assert np.abs(runs[True][-1].effort).max() > 0.4  # shoulder_pitch: 0.57 N*m
