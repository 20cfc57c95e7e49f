"""``simreal policy enable|disable``, ``goal``, ``topic list|echo``, ``episode``: ROS tools.

A pip install has rclpy but no ``ros2`` command (ros2cli is not on PyPI). These commands do,
with rclpy, what the docs would otherwise ask of ``ros2 service call``, ``ros2 topic pub
--once``, ``ros2 topic list -t`` and ``ros2 topic echo``, against the stack's nodes:

- ``policy enable`` / ``policy disable``: call the policy node's ``~/enable``
  (std_srvs/SetBool) and print its answer; a refusal exits 2 with the node's reason.
- ``goal``: publish one goal (sensor_msgs/JointState, ``position`` = goal joint positions) on
  the topic the policy node subscribes (``/goal``), after a subscriber has matched (a message
  published before discovery is lost), then wait until it is acknowledged.
- ``topic list``: topic names and types of the graph; ``topic echo``: a topic's messages as
  YAML, its type resolved from the graph and its QoS from the publishers'.
- ``episode start|stop|discard``: the episode recorder's std_srvs/Trigger services.

Every command takes the process environment through
:func:`simreal_ros.core.netenv.ros_env`: discovery stays on LOCALHOST unless the user set
``ROS_AUTOMATIC_DISCOVERY_RANGE`` or ``--discovery``. Bad input and anything that does not
appear within ``--timeout`` exits 2 with one ``error:`` line.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
from typing import Any

from simreal_ros.errors import SimrealError

#: The policy node's goal topic: its spec's ``topics.goal`` ('goal') in the root namespace.
GOAL_TOPIC = '/goal'
EPISODE_SERVICES = ('start', 'stop', 'discard')


def _add_ros_options(p: argparse.ArgumentParser, timeout_help: str) -> None:
    p.add_argument('--timeout', type=float, default=10.0, help=timeout_help)
    p.add_argument('--discovery', default=None,
                   help='ROS_AUTOMATIC_DISCOVERY_RANGE: localhost (default unless already '
                        'set) or subnet for a multi-machine robot')
    p.add_argument('--domain-id', type=int, default=None,
                   help='ROS_DOMAIN_ID [default: $ROS_DOMAIN_ID, else 0]')


def _client(ns: argparse.Namespace, what: str) -> Any:
    """Start a RosClient in the stack's environment (LOCALHOST unless chosen otherwise)."""
    if not ns.timeout > 0:
        raise SimrealError(f'--timeout must be > 0 s, got {ns.timeout:g}')
    from simreal_ros.core.netenv import ros_env
    os.environ.update(ros_env(discovery=ns.discovery, domain_id=ns.domain_id))
    from simreal_ros.ros.client import RosClient
    return RosClient(name=f'simreal_{what}_{os.getpid()}')


def _service_name(node: str, service: str) -> str:
    node = node if node.startswith('/') else '/' + node
    return f'{node.rstrip("/")}/{service}'


def _call(ns: argparse.Namespace, srv_type: type, name: str, request: Any) -> Any:
    client = _client(ns, 'call')
    try:
        return client.call(srv_type, name, request, timeout=ns.timeout)
    except TimeoutError as exc:
        raise SimrealError(f'{exc} (is the node running, with this ROS_DOMAIN_ID '
                           f'{os.environ["ROS_DOMAIN_ID"]} and discovery range?)') from None
    finally:
        client.close()


# ---- policy enable / disable -----------------------------------------------------------------
def cmd_policy_enable(ns: argparse.Namespace) -> int:
    """Call the policy node's ``~/enable`` and print its answer."""
    from std_srvs.srv import SetBool
    on = ns.policy_command == 'enable'
    res = _call(ns, SetBool, _service_name(ns.node, 'enable'), SetBool.Request(data=on))
    if not res.success:
        raise SimrealError(f'{ns.node} refused: {res.message}')
    print(res.message, flush=True)
    return 0


# ---- goal ------------------------------------------------------------------------------------
def goal_from_args(values: list[str], names: list[str] | None, positions: list[str] | None,
                   joint_names: tuple[str, ...] | list[str]) -> tuple[list[str], list[float]]:
    """Return (names, positions) of a goal; SimrealError naming what is wrong.

    Either ``values`` (one per robot joint, in the robot's order) or ``names`` with as many
    ``positions``; names must be robot joints, each once; values finite numbers (rad).
    """
    joints = list(joint_names)
    if values and (names or positions):
        raise SimrealError('give the goal either as J1 J2 ... or as --names/--positions, '
                           'not both')
    if not values and not (names or positions):
        raise SimrealError(f'no goal: give {len(joints)} joint positions (rad) in the order '
                           f'{joints}, or --names ... --positions ...')
    if values:
        names, raw = joints, values
        if len(raw) != len(joints):
            raise SimrealError(f'expected {len(joints)} joint positions (rad) in the order '
                               f'{joints}, got {len(raw)}')
    else:
        names, raw = names or [], positions or []
        if len(names) != len(raw):
            raise SimrealError(f'--names has {len(names)} joints but --positions '
                               f'{len(raw)} values')
        unknown = [n for n in names if n not in joints]
        if unknown:
            raise SimrealError(f'unknown joints {unknown}; the robot has {joints}')
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SimrealError(f'joints named twice: {dupes}')
    out = []
    for name, text in zip(names, raw, strict=True):
        try:
            x = float(text)
        except ValueError:
            raise SimrealError(f'{name}: {text!r} is not a number (rad)') from None
        if not math.isfinite(x):
            raise SimrealError(f'{name}: {text!r} is not a finite number (rad)')
        out.append(x)
    return list(names), out


def cmd_goal(ns: argparse.Namespace) -> int:
    """Publish one goal once a subscriber (the policy node) has matched."""
    from sensor_msgs.msg import JointState

    from simreal_ros.core.robot import load_robot
    robot = load_robot(ns.robot)
    names, positions = goal_from_args(ns.values, ns.names, ns.positions, robot.joint_names)
    index = {n: i for i, n in enumerate(robot.joint_names)}
    outside = [n for n, x in zip(names, positions, strict=True)
               if not robot.lower[index[n]] <= x <= robot.upper[index[n]]]
    if outside:
        print(f'simreal goal: warning: {outside} outside the joint limits; the policy node '
              'clamps the goal into them', file=sys.stderr)
    client = _client(ns, 'goal')
    try:
        from simreal_ros.ros import messages
        pub = client.publisher(JointState, ns.topic)
        try:
            client.wait_for_subscribers(pub, ns.timeout)
        except TimeoutError:
            raise SimrealError(f'no subscriber of {pub.topic_name} within {ns.timeout:g} s (is '
                               f'the policy node running, with this ROS_DOMAIN_ID '
                               f'{os.environ["ROS_DOMAIN_ID"]}?)') from None
        # stamp 0: the policy node reads names and positions only
        pub.publish(messages.joint_state(names, 0, positions))
        if not pub.wait_for_all_acked(_duration(ns.timeout)):
            raise SimrealError(f'the goal on {pub.topic_name} was not acknowledged within '
                               f'{ns.timeout:g} s')
        print(f'goal on {pub.topic_name}: ' + ', '.join(
            f'{n} {x:g}' for n, x in zip(names, positions, strict=True)), flush=True)
    finally:
        client.close()
    return 0


def _duration(seconds: float) -> Any:
    from rclpy.duration import Duration
    return Duration(nanoseconds=int(seconds * 1e9))


# ---- topic list / echo ---------------------------------------------------------------------
def cmd_topic_list(ns: argparse.Namespace) -> int:
    """Print the graph's topics (with their types, like ``ros2 topic list -t``)."""
    if not ns.spin_time > 0:
        raise SimrealError(f'--spin-time must be > 0 s, got {ns.spin_time:g}')
    client = _client(ns, 'topic')
    try:
        graph = client.topic_types(min_s=ns.spin_time, max_s=max(ns.timeout, ns.spin_time))
    finally:
        client.close()
    for name, types in sorted(graph.items()):
        print(f'{name} [{", ".join(types)}]' if ns.show_types else name)
    return 0


def message_class(type_name: str) -> type:
    """Import ``pkg/msg/Type``; SimrealError when it is malformed or not installed."""
    parts = type_name.split('/')
    if len(parts) != 3 or parts[1] != 'msg':
        raise SimrealError(f'{type_name!r} is not a message type (pkg/msg/Type)')
    try:
        cls: type = getattr(importlib.import_module(f'{parts[0]}.msg'), parts[2])
    except (ImportError, AttributeError):
        raise SimrealError(f'message type {type_name} is not installed in this Python '
                           f'({sys.executable})') from None
    return cls


def to_plain(value: Any) -> Any:
    """Return a message as nested dicts/lists of Python scalars (field order kept), for YAML."""
    if hasattr(value, 'get_fields_and_field_types'):
        return {name: to_plain(getattr(value, name))
                for name in value.get_fields_and_field_types()}
    if isinstance(value, bytes):  # a `byte` field is one byte; a byte[] several
        return value[0] if len(value) == 1 else list(value)
    if hasattr(value, 'tolist'):  # numpy arrays (fixed-size fields), numpy scalars
        return to_plain(value.tolist())
    if isinstance(value, (list, tuple)) or type(value).__name__ == 'array':
        return [to_plain(v) for v in value]
    return value


def message_yaml(msg: Any) -> str:
    """Return a message as YAML text, fields in their declared order (as ``ros2 topic echo``)."""
    import yaml
    text: str = yaml.safe_dump(to_plain(msg), sort_keys=False, default_flow_style=False,
                               width=1000)
    return text


def _echo_qos(client: Any, topic: str) -> Any:
    """Reliable and latched only where every publisher offers it (so each one matches)."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    infos = client.node.get_publishers_info_by_topic(topic)
    reliable = all(i.qos_profile.reliability == ReliabilityPolicy.RELIABLE for i in infos)
    latched = bool(infos) and all(
        i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for i in infos)
    return QoSProfile(depth=10,
                      reliability=ReliabilityPolicy.RELIABLE if reliable
                      else ReliabilityPolicy.BEST_EFFORT,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL if latched
                      else DurabilityPolicy.VOLATILE)


def cmd_topic_echo(ns: argparse.Namespace) -> int:
    """Print a topic's messages as YAML, ``---`` after each."""
    import queue

    from rclpy.validate_full_topic_name import validate_full_topic_name
    count = 1 if ns.once else ns.count
    if count is not None and count < 1:
        raise SimrealError(f'--count must be >= 1, got {count}')
    topic = ns.topic if ns.topic.startswith('/') else '/' + ns.topic
    try:
        validate_full_topic_name(topic)
    except Exception as exc:  # noqa: BLE001 - rclpy's InvalidTopicNameException
        raise SimrealError(f'{ns.topic!r} is not a valid topic name: '
                           f'{str(exc).splitlines()[0]}') from None
    client = _client(ns, 'echo')
    try:
        try:  # a publisher, not only the topic: the QoS is chosen from the publishers'
            client.wait_for(lambda: client.node.count_publishers(topic) > 0
                            and topic in dict(client.node.get_topic_names_and_types()),
                            ns.timeout, topic)
        except TimeoutError:
            raise SimrealError(f'no publisher of {topic} appeared within {ns.timeout:g} s '
                               f'(ROS_DOMAIN_ID {os.environ["ROS_DOMAIN_ID"]})') from None
        types = dict(client.node.get_topic_names_and_types())[topic]
        if len(types) != 1:
            raise SimrealError(f'topic {topic} has several types {types}')
        cls = message_class(types[0])
        inbox: queue.Queue[Any] = queue.Queue()
        client.node.create_subscription(cls, topic, inbox.put, _echo_qos(client, topic))
        printed = 0
        while count is None or printed < count:
            try:
                msg = inbox.get(timeout=0.2)
            except queue.Empty:
                continue
            sys.stdout.write(message_yaml(msg) + '---\n')
            sys.stdout.flush()
            printed += 1
    finally:
        client.close()
    return 0


# ---- episode start / stop / discard --------------------------------------------------------
def cmd_episode(ns: argparse.Namespace) -> int:
    """Call the episode recorder's ``~/episode/<action>`` (std_srvs/Trigger)."""
    from std_srvs.srv import Trigger
    name = _service_name(ns.node, f'episode/{ns.action}')
    res = _call(ns, Trigger, name, Trigger.Request())
    if not res.success:
        raise SimrealError(f'{name} refused: {res.message}')
    print(res.message, flush=True)
    return 0


def add_commands(sub: Any) -> None:
    """Add this group's sub-commands to the ``simreal`` parser."""
    p = sub.add_parser('policy', help='switch the policy node on or off (its ~/enable)',
                       description="call the policy node's ~/enable (std_srvs/SetBool) and "
                       "print its answer: enable ramps from the measured pose to the spec's "
                       'default pose, then the network drives; disable stops publishing (the '
                       'backend holds its last target). Same as: ros2 service call '
                       '/policy/enable std_srvs/srv/SetBool "{data: true}"')
    group = p.add_subparsers(dest='policy_command', metavar='ACTION', required=True)
    for action, text in (('enable', 'ramp to the default pose, then let the policy drive'),
                         ('disable', 'stop commanding (the backend holds its last target)')):
        q = group.add_parser(action, help=text, description=text)
        q.add_argument('--node', default='/policy',
                       help='the policy node (name with namespace) [default: /policy]')
        _add_ros_options(q, 'seconds to wait for the service to appear and answer '
                            '[default: 10]')
        q.set_defaults(func=cmd_policy_enable)

    p = sub.add_parser('goal', help='send the policy node a goal (joint positions, rad)',
                       description='publish one goal (sensor_msgs/JointState) on the topic the '
                       'policy node subscribes, once a subscriber has matched. Same as: ros2 '
                       'topic pub --once /goal sensor_msgs/msg/JointState "{name: [...], '
                       'position: [...]}"')
    p.add_argument('values', nargs='*', metavar='J',
                   help="goal joint positions (rad), one per robot joint in the robot's order")
    p.add_argument('--names', nargs='+', default=None, help='joint names (with --positions)')
    p.add_argument('--positions', nargs='+', default=None,
                   help='goal positions (rad) of --names, in the same order')
    p.add_argument('--robot', default='simreal_arm',
                   help='robot spec (name or path) whose joints the goal names '
                        '[default: simreal_arm]')
    p.add_argument('--topic', default=GOAL_TOPIC, help=f'goal topic [default: {GOAL_TOPIC}]')
    _add_ros_options(p, 'seconds to wait for a subscriber and for its acknowledgement '
                        '[default: 10]')
    p.set_defaults(func=cmd_goal)

    p = sub.add_parser('topic', help='list the topics of the graph, or print a topic',
                       description='what ros2 topic list -t / ros2 topic echo do, for a pip '
                       'install (no ros2 command)')
    group = p.add_subparsers(dest='topic_command', metavar='ACTION', required=True)
    q = group.add_parser('list', help='topic names and types',
                         description='print every topic of the graph with its types '
                         '(like ros2 topic list -t)')
    # discovery of a running node took 0.02-0.03 s, and 1.3 s with the 2-core machine at a
    # load of 7; a 1 s minimum once listed only the command's own two topics
    q.add_argument('--spin-time', type=float, default=2.0,
                   help='seconds to discover the graph at least; it is listed once it has '
                        'not changed for 0.3 s after that [default: 2]')
    q.add_argument('--no-types', dest='show_types', action='store_false',
                   help='names only (like ros2 topic list)')
    _add_ros_options(q, 'seconds at most to wait for a graph that keeps changing '
                        '[default: 10]')
    q.set_defaults(func=cmd_topic_list)
    q = group.add_parser('echo', help="print a topic's messages as YAML",
                         description="print a topic's messages as YAML, '---' after each; "
                         'the type comes from the graph, the QoS from the publishers '
                         '(latched topics such as /robot_description print their last '
                         'message)')
    q.add_argument('topic', help='topic name, e.g. /joint_states')
    q.add_argument('--once', action='store_true', help='exit after one message')
    q.add_argument('--count', type=int, default=None, help='exit after N messages')
    _add_ros_options(q, 'seconds to wait for a publisher of the topic [default: 10]')
    q.set_defaults(func=cmd_topic_echo)

    p = sub.add_parser('episode', help='start, stop or discard a teleop episode',
                       description="call the episode recorder's ~/episode/<action> "
                       '(std_srvs/Trigger) and print its answer. Same as: ros2 service call '
                       '/episodes/episode/start std_srvs/srv/Trigger')
    p.add_argument('action', choices=EPISODE_SERVICES)
    p.add_argument('--node', default='/episodes',
                   help='the episode recorder node [default: /episodes]')
    _add_ros_options(p, 'seconds to wait for the service to appear and answer [default: 10]')
    p.set_defaults(func=cmd_episode)
