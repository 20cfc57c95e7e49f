"""The recorder's part of the launch plan (``record:=true``): pairing, topics, provenance.

**Camera images** (``record_images:=``). Every camera of the robot spec publishes raw
``NAME/image_raw`` (640x480 rgb8 at 30 Hz for simreal_arm: 27.6 MB/s) and ``NAME/camera_info``
in each robot's namespace. Recorded by ``record_topics:=*`` in a sim2sim run, both sims'
cameras wrote 17.7-21.4 MB/s into the bag on the shared 2-core host and
``/sim_a/joint_states`` lost 16-20 % of its messages, enough to make the joint gap wrong
(docs/recording.md has the measurement). So by default (``auto``) the recorder leaves every
camera's ``image_raw`` and ``camera_info`` out unless an entry of ``record_topics:=`` other
than the bare ``*`` selects it (``sim_a/camera/image_raw``, ``'*/camera/*'``); ``true``
records them with the rest; ``false`` never (a plain topic name of a camera in
``record_topics:=`` is then a PlanError). Left out means not subscribed: the live camera gap
needs the images recorded.
"""

from __future__ import annotations

import fnmatch
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


#: Namespaces (under the graph root) whose camera topics a backend publishes; ``backend/`` is
#: where they move when the latency injector delays the camera route.
CAMERA_NAMESPACES: dict[str, tuple[str, ...]] = {
    'sim': ('', 'backend'),
    'real': ('', 'backend'),
    'twin': ('', 'backend', 'twin'),
    'sim2sim': ('sim_a', 'sim_a/backend', 'sim_b'),
}

#: What the recorder never records unless told otherwise (its own ``exclude`` default).
DEFAULT_EXCLUDE = ('/rosout', '/parameter_events')


def _selects(a: LaunchArgs, pattern: str, topic: str) -> bool:
    """Whether ``record_topics:=`` entry ``pattern`` selects absolute ``topic``.

    The recorder's rule: a pattern with a wildcard is absolute (a leading ``/`` added), a
    plain name resolves in the recorder's namespace (the graph root).
    """
    if any(c in pattern for c in '*?['):
        return fnmatch.fnmatchcase(topic, pattern if pattern.startswith('/') else '/' + pattern)
    return topic == (pattern if pattern.startswith('/') else f'{a.root}/{pattern}')


def camera_topics(a: LaunchArgs) -> list[str]:
    """Every camera topic (absolute) that the plan's backend may publish."""
    out = []
    for space in CAMERA_NAMESPACES[a.backend]:
        for cam in a.robot.cameras:
            for kind in ('image_raw', 'camera_info'):
                out.append('/'.join(p for p in (a.root, space, cam.name, kind) if p))
    return [t if t.startswith('/') else '/' + t for t in out]


def image_excludes(a: LaunchArgs) -> list[str]:
    """Return the camera topics the recorder leaves out under ``record_images:=``."""
    if a.record_images == 'true':
        return []
    out = []
    for topic in camera_topics(a):
        asked = [p for p in a.record_topics if p != '*' and _selects(a, p, topic)]
        if a.record_images == 'false':
            named = [p for p in asked if not any(c in p for c in '*?[')]
            if named:
                raise PlanError(f'record_topics:= names {named[0]} but record_images:=false '
                                f'leaves camera topics out; drop one of the two (or '
                                f'record_images:=auto)')
            out.append(topic)
        elif not asked:
            out.append(topic)
    return out


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
    custom += [f'backend={a.backend}', f'record_images={a.record_images}']
    if a.backend == 'sim2sim':  # the gap report names the engines of the pair
        custom += [f'engine_a={a.engine_a}', f'engine_b={a.engine_b}']
    elif a.backend in ('sim', 'twin'):
        custom.append(f'engine={a.engine}')
    primary, secondary = PAIRING.get(a.backend, ('', ''))
    if primary and a.latency is not None:
        # the injector delays the primary's contract topic: compare the undelayed stream
        head, _, tail = primary.rpartition('/')
        primary = f'{head}/backend/{tail}' if head else f'backend/{tail}'
    excluded = image_excludes(a)
    params: dict[str, Any] = {
        'bag': a.bag, 'topics': list(a.record_topics),
        'exclude': list(DEFAULT_EXCLUDE) + excluded if excluded else [],
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
