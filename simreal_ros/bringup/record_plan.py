"""The recorder's part of the launch plan (``record:=true``): pairing, topics, provenance."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simreal_ros.bringup.arguments import LaunchArgs
from simreal_ros.bringup.spec import NodeSpec, prevalidate
from simreal_ros.core.paths import resolve_named
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


def config_files(a: LaunchArgs) -> tuple[list[str], list[str]]:
    """``key=path`` entries to embed and ``key=value`` entries for values that are not files."""
    embed: list[str] = []
    custom: list[str] = []
    for arg, (key, kind) in EMBEDDED.items():
        value = a.text[arg]
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
        embed += _referenced(a, arg, key)
    return embed, custom


def _referenced(a: LaunchArgs, arg: str, key: str) -> list[str]:
    """Files a config points to: the robot's URDF, the policy's weights (hashed)."""
    if arg == 'robot':
        return [f'{key}.urdf={a.robot.urdf.resolve()}']
    if arg == 'policy' and a.policy is not None:
        return [f'{key}.model={a.policy.model.resolve()}']
    return []


def recorder_spec(a: LaunchArgs) -> NodeSpec:
    """Return the recorder NodeSpec for ``record:=true``."""
    if not a.record_topics:
        raise PlanError('record_topics:= needs at least one topic name or pattern (or "*")')
    embed, custom = config_files(a)
    custom.append(f'backend={a.backend}')
    if a.backend == 'sim2sim':  # the gap report names the engines of the pair
        custom += [f'engine_a={a.engine_a}', f'engine_b={a.engine_b}']
    elif a.backend in ('sim', 'twin'):
        custom.append(f'engine={a.engine}')
    primary, secondary = PAIRING.get(a.backend, ('', ''))
    if primary and a.latency is not None:
        # the injector delays the primary's contract topic: compare the undelayed stream
        head, _, tail = primary.rpartition('/')
        primary = f'{head}/backend/{tail}' if head else f'backend/{tail}'
    params: dict[str, Any] = {
        'bag': a.bag, 'topics': list(a.record_topics),
        'storage': a.bag_storage, 'compression': a.bag_compression,
        'split_duration_s': a.bag_split_duration_s, 'split_size_mb': a.bag_split_size_mb,
        'gap_primary': _join(a.root, primary) if primary else '',
        'gap_secondary': _join(a.root, secondary) if secondary else '',
        'embed': embed, 'custom_data': custom,
        'use_sim_time': a.use_sim_time,
    }
    # ROS parameter files cannot type an empty list: leave empty ones out
    params = {k: v for k, v in params.items() if v != []}
    prevalidate('recorder', params, 'recorder')
    return NodeSpec('recorder', 'recorder', a.root, params)
