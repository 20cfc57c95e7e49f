"""The latency injector's presets inside the training world (no ROS).

Training draws one preset (``config/latency/*.yaml``) per episode and runs every message of the
command and observation paths through that preset's routes with the injector's own model,
:class:`simreal_ros.latency.injection.RouteState`: the same delay distributions, loss models, FIFO
order, duplicates and schedules, seeded the same way (from a seed and the route's name). So a
command published at ``t`` reaches the simulated servos when the injector node would deliver it,
or never, and the policy acts on the newest ``joint_states`` that has arrived, however old.

:class:`RouteQueue` is one route's messages in flight; :class:`LatencyPreset` is a preset with
its sampling weight; :func:`parse_latency_presets` reads and checks the training config's
``latency_presets:`` list.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
import heapq
from itertools import count
from typing import Any, Callable, Generic, Sequence, TypeVar

import numpy as np

from simreal_ros.core.paths import resolve_named, share_dir
from simreal_ros.errors import ConfigError
from simreal_ros.latency.injection import Profile, RouteConfig, RouteState, load_profile

T = TypeVar('T')

#: The routes of a preset that training models (the planner binds the same names).
COMMAND, OBSERVATION = 'command', 'observation'


def shipped_presets() -> list[str]:
    """Names of the shipped latency presets (``config/latency/*.yaml``)."""
    base = share_dir() / 'config' / 'latency'
    return sorted(p.stem for p in base.glob('*.y*ml')) if base.is_dir() else []


@lru_cache(maxsize=64)
def _load(value: str) -> Profile:
    return load_profile(value)


@dataclass(frozen=True)
class LatencyPreset:
    """One entry of ``latency_presets:``: a preset name or profile path and its weight."""

    preset: str
    weight: float = 1.0

    @property
    def profile(self) -> Profile:
        """The parsed profile (cached)."""
        return _load(self.preset)

    def route(self, name: str) -> RouteConfig:
        """Return the route ``name``; a profile without it passes that path through."""
        for r in self.profile.routes:
            if r.name == name:
                return r
        return RouteConfig(name=name)


def parse_latency_presets(value: Any, source: str, key: str = 'latency_presets'
                          ) -> tuple[LatencyPreset, ...]:
    """Parse ``latency_presets:`` (a list of names/paths or ``{preset, weight}`` mappings).

    Raises ConfigError naming ``<key>[i]`` and the shipped choices for an unknown preset.
    """
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(source, key, 'a non-empty list of latency presets (names of '
                          f'{shipped_presets()} or profile paths, optionally '
                          '{preset: NAME, weight: W})', value)
    out = []
    for i, item in enumerate(value):
        k = f'{key}[{i}]'
        weight: Any = 1.0
        name = item
        if isinstance(item, dict):
            extra = sorted(set(item) - {'preset', 'weight'})
            if extra or 'preset' not in item:
                raise ConfigError(source, k, 'a preset name or {preset: NAME, weight: W}',
                                  item)
            name, weight = item['preset'], item.get('weight', 1.0)
            k_w = f'{k}.weight'
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) \
                    or not np.isfinite(weight) or weight <= 0:
                raise ConfigError(source, k_w, 'a finite number > 0', weight)
        if not isinstance(name, str) or not name:
            raise ConfigError(source, k, f'a latency preset (one of {shipped_presets()}) or '
                              'a profile path', name)
        try:
            resolve_named('latency', name)
        except ConfigError:
            raise ConfigError(source, k, f'a latency preset (one of {shipped_presets()}) or '
                              'an existing profile path', name) from None
        _load(name)  # a preset that exists but is invalid fails with its own file and key
        out.append(LatencyPreset(name, float(weight)))
    return tuple(out)


def draw_preset(presets: Sequence[LatencyPreset], rng: np.random.Generator) -> LatencyPreset:
    """Draw one preset with probability proportional to its weight."""
    w = np.array([p.weight for p in presets], dtype=float)
    return presets[int(rng.choice(len(presets), p=w / w.sum()))]


class RouteQueue(Generic[T]):
    """The messages in flight on one injector route, delivered as the injector node does.

    :meth:`send` asks the route's :class:`RouteState` for the message's fate (lost, delivered
    at some time, duplicated, a frozen repeat of the previous message) and queues each delivery;
    :meth:`due` returns what has arrived by a time, in delivery order (ties: send order).
    ``perturb(item, rng)`` (optional) applies the route's value faults at reception, like the
    node, with the route's value stream.
    """

    def __init__(self, config: RouteConfig, seed: int,
                 perturb: Callable[[T, np.random.Generator], T] | None = None) -> None:
        self.state = RouteState(config, seed, 0)
        self.perturb = perturb if not config.perturb.empty else None
        self._heap: list[tuple[int, int, T]] = []
        self._order = count()
        self._held: T | None = None
        self.sent = 0
        self.lost = 0

    def send(self, item: T, now_ns: int) -> int:
        """Hand ``item`` to the route at ``now_ns``; return how many deliveries it gets."""
        self.sent += 1
        if self.perturb is not None:
            item = self.perturb(item, self.state.rng_values)
        _seq, deliveries = self.state.decide(now_ns)
        n = 0
        for d in deliveries:
            if not d.delivered:
                self.lost += 1
                continue
            payload, self._held = d.payload(item, self._held)
            heapq.heappush(self._heap, (d.deliver_ns, next(self._order), payload))
            n += 1
        return n

    def due(self, now_ns: int) -> list[T]:
        """Pop and return every message delivered at or before ``now_ns``, in order."""
        out = []
        heap = self._heap
        while heap and heap[0][0] <= now_ns:
            out.append(heapq.heappop(heap)[2])
        return out

    @property
    def next_ns(self) -> int | None:
        """Delivery time of the next message in flight (None: nothing in flight)."""
        return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        return len(self._heap)
