"""The recorder's part of the launch plan (``record:=true``): pairing, topics, provenance."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from simreal_ros.bag.recorder_config import RecorderConfig
from simreal_ros.bringup.arguments import non_negative, uses_sim_time
from simreal_ros.bringup.spec import NodeSpec, prevalidate
from simreal_ros.errors import ConfigError, PlanError

#: Live-gap pairing per backend: (primary, secondary) joint_states, relative to the graph root.
PAIRING: dict[str, tuple[str, str]] = {
    'sim2sim': ('sim_a/joint_states', 'sim_b/joint_states'),
    'twin': ('joint_states', 'twin/joint_states'),
}

#: Launch arguments whose config files are embedded in the bag's custom_data:
#: argument -> (custom_data key, config kind under config/).
EMBEDDED: dict[str, tuple[str, str]] = {
    'robot': ('robot_spec', 'robots'),
    'overlay': ('overlay', 'overlays'),
    'overlay_b': ('overlay_b', 'overlays'),
    'randomization': ('randomization', 'randomization'),
    'scene': ('scene', 'scenes'),
    'latency': ('injector_profile', 'latency'),
    'policy': ('policy_spec', 'policies'),
}


def _join(root: str, rel: str) -> str:
    return f'{root.rstrip("/")}/{rel}' if root else rel


def config_files(args: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """``key=path`` entries to embed and ``key=value`` entries for values that are not files."""
    from simreal_ros.core.paths import resolve_named
    embed: list[str] = []
    custom: list[str] = []
    for arg, (key, kind) in EMBEDDED.items():
        value = str(args.get(arg, '') or '')
        if not value:
            continue
        custom.append(f'{key}.argument={value}')
        try:
            path = resolve_named(kind, value)
        except ConfigError:
            if Path(value).expanduser().is_dir():
                continue  # e.g. a policy directory: its name is kept as the argument
            if arg == 'robot':
                raise PlanError(f'robot:={value!r}: no such robot spec') from None
            continue
        embed.append(f'{key}={path.resolve()}')
        embed += _referenced(arg, path, key)
    return embed, custom


def _referenced(arg: str, path: Path, key: str) -> list[str]:
    """Files a config points to: the robot's URDF, the policy's weights (hashed)."""
    try:
        if arg == 'robot':
            from simreal_ros.core.robot import load_robot
            return [f'{key}.urdf={load_robot(str(path)).urdf.resolve()}']
        if arg == 'policy':
            from simreal_ros.policy.spec import load_policy_spec
            return [f'{key}.model={load_policy_spec(path).model.resolve()}']
    except ConfigError:
        pass  # the node that loads it names the problem at start-up
    return []


def recorder_spec(args: Mapping[str, str], root: str) -> NodeSpec:
    """Return the recorder NodeSpec for ``record:=true``."""
    topics = [t.strip() for t in args.get('record_topics', '*').split(',') if t.strip()]
    if not topics:
        raise PlanError('record_topics:= needs at least one topic name or pattern (or "*")')
    embed, custom = config_files(args)
    custom.append(f'backend={args["backend"]}')
    if args['backend'] == 'sim2sim':  # the gap report names the engines of the pair
        from simreal_ros.bringup.plan_bridge import engine_of
        custom += [f'engine_a={engine_of(args, "a")}', f'engine_b={engine_of(args, "b")}']
    elif args['backend'] in ('sim', 'twin'):
        custom.append(f'engine={args.get("engine", "")}')
    primary, secondary = PAIRING.get(args['backend'], ('', ''))
    if primary and args.get('latency'):
        # the injector delays the primary's contract topic: compare the undelayed stream
        head, _, tail = primary.rpartition('/')
        primary = f'{head}/backend/{tail}' if head else f'backend/{tail}'
    split = {param: non_negative({arg: args.get(arg, '0')}, arg, 'a number >= 0 (0 = never)')
             for arg, param in (('bag_split_duration', 'split_duration_s'),
                                ('bag_split_size', 'split_size_mb'))}
    params: dict[str, Any] = {
        'bag': args.get('bag', ''), 'topics': topics,
        'storage': args.get('bag_storage', 'mcap'),
        'compression': args.get('bag_compression', 'none'), **split,
        'gap_primary': _join(root, primary) if primary else '',
        'gap_secondary': _join(root, secondary) if secondary else '',
        'embed': embed, 'custom_data': custom,
        'use_sim_time': uses_sim_time(args),
    }
    # ROS parameter files cannot type an empty list: leave empty ones out
    params = {k: v for k, v in params.items() if v != []}
    prevalidate(RecorderConfig, params, 'recorder')
    return NodeSpec('recorder', 'recorder', root, params)
