"""``simreal_episodes``: cut teleoperation into episodes, one bag each, checked at stop.

Services (std_srvs/Trigger):

* ``~/episode/start``: open ``<directory>/episode_NNNN`` (a rosbag2 bag, MCAP) and record the
  ``topics`` into it; fails while an episode is open;
* ``~/episode/stop``: close it, run the quality checks
  (:func:`simreal_ros.teleop.quality.check_teleop_episode`: dropped samples, gaps, joint
  limit hits, frozen camera, leader-follower lag and tracking, jerk, idle time, duration) and
  write ``episode.yaml`` next to the bag with the verdict: ``accepted`` and the ``reasons``
  it was rejected (one line per failed check), the task label, operator, robot, calibration
  and time range. The answer's message says ``episode N accepted (D s)`` or ``episode N
  rejected: <reasons>``;
* ``~/episode/discard``: drop the open episode (or, with none open, the last one stopped):
  its directory is deleted.

Subscriptions are raw (the CDR bytes are written as received, stamped with the receive time),
at the contract's QoS, made at start-up and kept: a subscription made at ``~/episode/start``
would miss the episode's first few hundred ms while DDS matches it (measured 2 s of a 2.2 s
episode lost on a loaded machine). Between episodes the callbacks drop what they get.
``/diagnostics``: the open episode, episodes accepted / rejected / discarded.
"""

from __future__ import annotations

import datetime
from pathlib import Path
import shutil
import threading
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from sensor_msgs.msg import Image, JointState
from std_srvs.srv import Trigger

from simreal_ros import __version__
from simreal_ros.bag import BagWriter
from simreal_ros.core.robot import load_robot
from simreal_ros.errors import SimrealError
from simreal_ros.gap.episode import load_episode
from simreal_ros.ros import messages, qos
from simreal_ros.ros.params import declare_dataclass
from simreal_ros.ros.runtime import run_node
from simreal_ros.teleop.quality import (
    EPISODE_META,
    EpisodesConfig,
    check_teleop_episode,
    next_episode_index,
    reasons,
    write_meta,
)

TYPES = {'sensor_msgs/msg/JointState': JointState, 'sensor_msgs/msg/Image': Image}


def topic_type(name: str) -> str:
    """Return the message type of a recorded topic (see :class:`EpisodesConfig`)."""
    return 'sensor_msgs/msg/Image' if name.endswith('image_raw') else \
        'sensor_msgs/msg/JointState'


class EpisodesNode(Node):
    """Episode services over raw subscriptions into one bag per episode."""

    def __init__(self) -> None:
        super().__init__('episodes')
        self.cfg = cfg = EpisodesConfig.from_mapping(declare_dataclass(self, EpisodesConfig),
                                                     f'{self.get_fully_qualified_name()} '
                                                     f'params')
        self.robot = load_robot(cfg.robot)
        self.th, self.tth = cfg.parsed_thresholds()
        stamp = datetime.datetime.now().strftime('%Y%m%d_%H%M%S')
        self.directory = Path(cfg.directory or f'episodes/simreal_{stamp}').expanduser()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SimrealError(f'cannot create the episodes directory {self.directory}: '
                               f'{exc.strerror}') from None
        self.topics = [self.resolve_topic_name(t) for t in cfg.topics if t]
        self.lock = threading.Lock()
        self.writer: BagWriter | None = None
        self.handles: dict[str, int] = {}
        self.subs = [self.create_subscription(TYPES[topic_type(t)], t, self._callback(t),
                                              qos.STATE, raw=True) for t in self.topics]
        self.current: dict[str, Any] | None = None
        self.last_stopped: Path | None = None
        self.last_accepted = False
        self.counts = {'accepted': 0, 'rejected': 0, 'discarded': 0}
        self.pub_diag = self.create_publisher(DiagnosticArray, '/diagnostics', qos.DIAGNOSTICS)
        self.create_service(Trigger, '~/episode/start', self._on_start)
        self.create_service(Trigger, '~/episode/stop', self._on_stop)
        self.create_service(Trigger, '~/episode/discard', self._on_discard)
        self.create_timer(1.0, self._publish_diagnostics)
        self.get_logger().info(f'episodes of {", ".join(self.topics)} into {self.directory}'
                               f' (task {cfg.task!r}, operator {cfg.operator!r})')

    # ---- recording -----------------------------------------------------------------------------
    def _callback(self, topic: str) -> Any:
        def on_message(data: bytes) -> None:
            now = time.time_ns()
            with self.lock:
                if self.writer is not None:
                    self.writer.write(self.handles[topic], now, data)
                    self.current['messages'] += 1  # type: ignore[index]
        return on_message

    def _on_start(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        with self.lock:
            if self.writer is not None:
                assert self.current is not None
                res.success = False
                res.message = f'episode {self.current["index"]} is open: stop or discard it'
                return res
            index = next_episode_index(self.directory)
            path = self.directory / f'episode_{index:04d}'
            custom = {'episode.index': str(index), 'episode.task': self.cfg.task,
                      'episode.operator': self.cfg.operator, 'episode.robot': self.robot.name,
                      'episode.calibration': self.cfg.calibration,
                      'simreal_ros.version': __version__}
            try:
                path.mkdir()
                writer = BagWriter(path / 'bag', custom_data=custom)
            except (OSError, SimrealError) as exc:
                res.success = False
                res.message = f'cannot open {path}: {exc}'
                return res
            self.handles = {t: writer.add_topic(t, topic_type(t)) for t in self.topics}
            self.writer = writer
            self.current = {'index': index, 'path': path, 'start_ns': time.time_ns(),
                            'messages': 0}
        res.success = True
        res.message = f'episode {index} started: {path}'
        self.get_logger().info(res.message)
        self._publish_diagnostics()
        return res

    def _close(self) -> dict[str, Any] | None:
        with self.lock:
            writer, current = self.writer, self.current
            self.writer, self.current = None, None
        if writer is None or current is None:
            return None
        writer.close()
        current['stop_ns'] = time.time_ns()
        return current

    def _on_stop(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        current = self._close()
        if current is None:
            res.success = False
            res.message = 'no episode is open: call ~/episode/start first'
            return res
        path: Path = current['path']
        duration = (current['stop_ns'] - current['start_ns']) / 1e9
        meta: dict[str, Any] = {
            'index': current['index'], 'task': self.cfg.task, 'operator': self.cfg.operator,
            'robot': self.robot.name, 'calibration': self.cfg.calibration,
            'start_ns': current['start_ns'], 'stop_ns': current['stop_ns'],
            'duration_s': round(duration, 3), 'topics': self.topics, 'bag': 'bag',
            'checked': self.cfg.check, 'accepted': True, 'reasons': []}
        if self.cfg.check:
            try:
                ep = load_episode(str(path / 'bag'))
                commands = next((t for t in self.topics if t.endswith('joint_commands')),
                                '/joint_commands')
                states = next((t for t in self.topics if t.endswith('/joint_states')
                               and 'leader' not in t), '/joint_states')
                ep.commands_topic = commands if commands in ep.joints else ''
                verdict = check_teleop_episode(ep, self.robot, self.th, self.tth, commands,
                                               states)
                meta['accepted'] = verdict.passed
                meta['reasons'] = reasons(verdict)
                meta['findings'] = verdict.as_dict()['findings']
            except SimrealError as exc:
                meta['accepted'] = False
                meta['reasons'] = [f'unreadable episode: {exc}']
        write_meta(path / EPISODE_META, meta)
        self.last_stopped = path
        self.last_accepted = bool(meta['accepted'])
        self.counts['accepted' if meta['accepted'] else 'rejected'] += 1
        res.success = True
        res.message = (f'episode {current["index"]} accepted ({duration:.1f} s)'
                       if meta['accepted'] else
                       f'episode {current["index"]} rejected: {"; ".join(meta["reasons"])}')
        # one call site per severity: rclpy refuses a site whose severity changes
        if meta['accepted']:
            self.get_logger().info(res.message)
        else:
            self.get_logger().warning(res.message)
        self._publish_diagnostics()
        return res

    def _on_discard(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        current = self._close()
        path = current['path'] if current is not None else self.last_stopped
        if path is None:
            res.success = False
            res.message = 'no episode to discard'
            return res
        if current is None:  # the last stopped one: it no longer counts as checked
            key = 'accepted' if self.last_accepted else 'rejected'
            self.counts[key] -= 1
        shutil.rmtree(path, ignore_errors=True)
        self.last_stopped = None
        self.counts['discarded'] += 1
        res.success = True
        res.message = f'episode {path.name} discarded'
        self.get_logger().info(res.message)
        self._publish_diagnostics()
        return res

    # ---- diagnostics -------------------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        with self.lock:
            current = dict(self.current) if self.current is not None else None
        values: dict[str, object] = {
            'directory': str(self.directory), 'recording': current is not None,
            'episode': current['index'] if current else -1,
            'messages': current['messages'] if current else 0, **self.counts}
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        arr.status = [messages.diagnostic_status(
            f'{self.get_fully_qualified_name()}: episodes', str(self.directory), 'ok',
            f'recording episode {current["index"]}' if current else 'idle', values)]
        try:
            self.pub_diag.publish(arr)
        except Exception:  # noqa: BLE001 - the context is shutting down
            pass

    def close(self) -> None:
        """Close an open episode's bag (kept, unchecked: stop was never called)."""
        self._close()


def main(args: list[str] | None = None) -> int:
    """Run the episodes node."""
    return run_node(EpisodesNode, args)


if __name__ == '__main__':
    raise SystemExit(main())
