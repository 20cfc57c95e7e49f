"""The latency injector's model: profiles, routes, and the fate of every message.

Pure data and numpy. A :class:`Profile` (``config/latency/*.yaml``) holds named routes; a
:class:`RouteState` is one route at run time and turns "a message arrived at ``t``" into the
list of its deliveries (:meth:`RouteState.decide`). The ROS node only moves bytes and keeps time.

Fate codes (the ground-truth topic and the bag use them): see :data:`FATES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import math
from pathlib import Path
from typing import Any, Mapping, Sequence, TypeVar
import zlib

import numpy as np

from simreal_ros.core.paths import resolve_named
from simreal_ros.core.validate import Section, check_number, load_yaml_mapping
from simreal_ros.errors import ConfigError
from simreal_ros.latency.delays import NS, ZERO, Delay, parse_delay

T = TypeVar('T')

DELIVERED, LOST, DUPLICATE, RATE_DROPPED, REPEATED = 0, 1, 2, 3, 4
#: Fates of a delivery that is published (the others are not).
SENT_FATES = frozenset((DELIVERED, DUPLICATE, REPEATED))
FATES = {DELIVERED: 'delivered', LOST: 'lost', DUPLICATE: 'duplicate',
         RATE_DROPPED: 'rate_dropped', REPEATED: 'repeated'}
#: Column names of one ground-truth event row.
EVENT_COLUMNS = ('route', 'seq', 'receive_ns', 'target_delay_ns', 'deliver_ns', 'fate')
ORDERS = ('fifo', 'free')
FAULTS = ('outage', 'freeze', 'delay', 'loss')


@dataclass(frozen=True)
class Loss:
    """Message loss: Bernoulli (``p``) or Gilbert-Elliott two-state bursts."""

    model: str = 'none'                  # none | bernoulli | gilbert_elliott
    p: float = 0.0                       # bernoulli
    p_good_to_bad: float = 0.0           # gilbert_elliott transition probabilities per message
    p_bad_to_good: float = 1.0
    loss_good: float = 0.0               # loss probability in each state
    loss_bad: float = 1.0

    @property
    def expected_rate(self) -> float:
        """Long-run fraction of messages lost."""
        if self.model == 'bernoulli':
            return self.p
        if self.model == 'gilbert_elliott':
            total = self.p_good_to_bad + self.p_bad_to_good
            if total == 0:
                return self.loss_good
            return (self.p_bad_to_good * self.loss_good
                    + self.p_good_to_bad * self.loss_bad) / total
        return 0.0


NO_LOSS = Loss()


@dataclass(frozen=True)
class Fault:
    """A scheduled fault on ``[start_s, end_s)`` of route time (seconds since the route began)."""

    kind: str                            # outage | freeze | delay | loss
    start_s: float
    end_s: float
    delay: Delay | None = None           # kind == 'delay'
    loss: Loss | None = None             # kind == 'loss'

    def active(self, t_s: float) -> bool:
        """Whether the fault is on at route time ``t_s``."""
        return self.start_s <= t_s < self.end_s


@dataclass(frozen=True)
class Channel:
    """Noise, bias and quantization of one numeric field (e.g. JointState.position)."""

    noise_std: float = 0.0
    bias: float = 0.0
    quantization: float = 0.0

    def apply(self, values: Any, rng: np.random.Generator) -> Any:
        """Return perturbed ``values`` (a float array)."""
        v = np.asarray(values, dtype=float) + self.bias
        if self.noise_std > 0.0:
            v = v + rng.normal(0.0, self.noise_std, v.shape)
        if self.quantization > 0.0:
            v = np.round(v / self.quantization) * self.quantization
        return v


@dataclass(frozen=True)
class ImageEffects:
    """The perception gap on sensor_msgs/Image: applied in this order."""

    gain: float = 1.0                    # exposure: pixel values times gain
    blur_sigma_px: float = 0.0           # Gaussian blur
    noise_std: float = 0.0               # additive Gaussian noise, in pixel value units
    jpeg_quality: int = 0                # 1..100: re-compress with JPEG; 0 = off


@dataclass(frozen=True)
class Perturbation:
    """Value perturbations; which fields apply depends on the message type of the route."""

    fields: dict[str, Channel] = field(default_factory=dict)   # 'position', 'angular_velocity'
    image: ImageEffects | None = None

    @property
    def empty(self) -> bool:
        """Whether nothing is changed (the route passes bytes through untouched)."""
        return not self.fields and self.image is None


JOINT_STATE_FIELDS = ('position', 'velocity', 'effort')
IMU_FIELDS = ('angular_velocity', 'linear_acceleration')


@dataclass(frozen=True)
class RouteConfig:
    """One relay: ``input`` topic -> ``output`` topic with its timing and value faults."""

    name: str
    input: str = ''
    output: str = ''
    msg_type: str = ''                    # '' = take it from the graph
    delay: Delay = ZERO
    order: str = 'fifo'
    loss: Loss = NO_LOSS
    duplicate_p: float = 0.0
    max_rate_hz: float = 0.0              # 0 = no throttling
    decimate: int = 1                     # keep every n-th message
    schedule: tuple[Fault, ...] = ()
    perturb: Perturbation = field(default_factory=Perturbation)

    @property
    def passthrough(self) -> bool:
        """Whether every message goes out at once, unchanged, exactly once."""
        return (self.delay.is_zero and self.loss.model == 'none' and self.duplicate_p == 0.0
                and self.max_rate_hz == 0.0 and self.decimate == 1 and not self.schedule)


@dataclass(frozen=True)
class Profile:
    """A latency profile: a description, its source file and its routes."""

    name: str
    description: str
    routes: tuple[RouteConfig, ...]
    source: str = ''

    def route(self, name: str) -> RouteConfig:
        """Return the route called ``name``."""
        for r in self.routes:
            if r.name == name:
                return r
        raise ConfigError(self.source, f'routes.{name}', 'a route of this profile',
                          f'missing (routes: {[r.name for r in self.routes]})')


def _delay_value(sec: Section, key: str, base_dir: Path | None) -> Delay:
    v = sec.raw(key, None)
    if v is None:
        return ZERO
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        value = check_number(v, sec.source, sec.path(key), minimum=0.0)
        return Delay('constant', {'value': value})
    return parse_delay(sec.section(key), base_dir)


def _probability(sec: Section, key: str, default: float) -> float:
    return sec.number(key, default, minimum=0.0, maximum=1.0)


def parse_loss(sec: Section) -> Loss:
    """Parse ``loss:`` (``{model: bernoulli, p: 0.01}`` or a Gilbert-Elliott mapping)."""
    model = sec.string('model')
    if model == 'none':
        sec.reject_unknown()
        return NO_LOSS
    if model == 'bernoulli':
        out = Loss('bernoulli', p=_probability(sec, 'p', 0.0))
    elif model == 'gilbert_elliott':
        out = Loss('gilbert_elliott',
                   p_good_to_bad=_probability(sec, 'p_good_to_bad', 0.0),
                   p_bad_to_good=_probability(sec, 'p_bad_to_good', 1.0),
                   loss_good=_probability(sec, 'loss_good', 0.0),
                   loss_bad=_probability(sec, 'loss_bad', 1.0))
        if out.p_bad_to_good == 0.0 and out.p_good_to_bad > 0.0:
            raise ConfigError(sec.source, sec.path('p_bad_to_good'),
                              '> 0 (with 0 the link never leaves the bad state)', 0)
    else:
        raise ConfigError(sec.source, sec.path('model'),
                          "one of ['bernoulli', 'gilbert_elliott', 'none']", model)
    sec.reject_unknown()
    return out


def _parse_fault(sec: Section, base_dir: Path | None) -> Fault:
    kind = sec.string('fault')
    if kind not in FAULTS:
        raise ConfigError(sec.source, sec.path('fault'), f'one of {list(FAULTS)}', kind)
    start = sec.number('start_s', minimum=0.0)
    if sec.has('end_s') == sec.has('duration_s'):
        raise ConfigError(sec.source, sec.key, 'exactly one of end_s, duration_s',
                          'both' if sec.has('end_s') else 'neither')
    end = (sec.number('end_s') if sec.has('end_s')
           else start + sec.number('duration_s', positive=True))
    if end <= start:
        raise ConfigError(sec.source, sec.path('end_s'), f'> start_s ({start})', end)
    delay = loss = None
    if kind == 'delay':
        delay = _delay_value(sec, 'delay', base_dir)
        if not sec.has('delay'):
            raise ConfigError(sec.source, sec.path('delay'), 'the delay during the fault',
                              has_got=False)
    if kind == 'loss':
        loss = parse_loss(sec.section('loss'))
    sec.reject_unknown()
    return Fault(kind, start, end, delay, loss)


def _parse_channel(sec: Section) -> Channel:
    ch = Channel(sec.number('noise_std', 0.0, minimum=0.0), sec.number('bias', 0.0),
                 sec.number('quantization', 0.0, minimum=0.0))
    sec.reject_unknown()
    return ch


def _parse_perturb(sec: Section) -> Perturbation:
    fields: dict[str, Channel] = {}
    for name in JOINT_STATE_FIELDS + IMU_FIELDS:
        if sec.has(name):
            fields[name] = _parse_channel(sec.section(name))
    image = None
    if sec.has('image'):
        s = sec.section('image')
        image = ImageEffects(
            gain=s.number('gain', 1.0, minimum=0.0),
            blur_sigma_px=s.number('blur_sigma_px', 0.0, minimum=0.0, maximum=50.0),
            noise_std=s.number('noise_std', 0.0, minimum=0.0),
            jpeg_quality=s.integer('jpeg_quality', 0, minimum=0, maximum=100))
        s.reject_unknown()
    sec.reject_unknown()
    return Perturbation(fields, image)


def parse_route(name: str, data: Any, source: str, base_dir: Path | None = None) -> RouteConfig:
    """Parse one entry of ``routes:``."""
    sec = Section(data if data is not None else {}, source, f'routes.{name}')
    order = sec.string('order', 'fifo')
    if order not in ORDERS:
        raise ConfigError(source, sec.path('order'), f'one of {list(ORDERS)}', order)
    rate = sec.section('rate', {})
    max_rate = rate.number('max_hz', 0.0, minimum=0.0)
    decimate = rate.integer('decimate', 1, minimum=1)
    rate.reject_unknown()
    schedule = tuple(_parse_fault(Section(item, source, f'{sec.path("schedule")}[{i}]'),
                                  base_dir)
                     for i, item in enumerate(sec.items('schedule', [])))
    route = RouteConfig(
        name=name,
        input=sec.raw('input', '') or '',
        output=sec.raw('output', '') or '',
        msg_type=sec.raw('type', '') or '',
        delay=_delay_value(sec, 'delay', base_dir),
        order=order,
        loss=parse_loss(sec.section('loss')) if sec.has('loss') else NO_LOSS,
        duplicate_p=_probability(sec, 'duplicate_p', 0.0),
        max_rate_hz=max_rate, decimate=decimate, schedule=schedule,
        perturb=_parse_perturb(sec.section('perturb')) if sec.has('perturb')
        else Perturbation())
    for key in ('input', 'output', 'msg_type'):
        v = getattr(route, key)
        if not isinstance(v, str):
            raise ConfigError(source, sec.path('type' if key == 'msg_type' else key),
                              'a string', v)
    if route.msg_type and route.msg_type.count('/') != 2:
        raise ConfigError(source, sec.path('type'),
                          'a ROS type such as sensor_msgs/msg/JointState', route.msg_type)
    sec.reject_unknown()
    return route


def parse_profile(data: Mapping[str, Any], source: str, name: str = '',
                  base_dir: Path | None = None) -> Profile:
    """Parse a profile mapping (the content of a ``config/latency/*.yaml``)."""
    sec = Section(data, source)
    description = sec.raw('description', '')
    routes_sec = sec.section('routes')
    if not routes_sec.data:
        raise ConfigError(source, 'routes', 'at least one route', 'none')
    routes = tuple(parse_route(str(k), routes_sec.raw(str(k)), source, base_dir)
                   for k in routes_sec.data)
    sec.raw('sources', None)  # documentation only: where the numbers come from
    sec.reject_unknown()
    return Profile(name or Path(source).stem, str(description), routes, source)


def load_profile(value: str) -> Profile:
    """Load a shipped preset by name (``wifi``) or a profile YAML by path."""
    path = resolve_named('latency', value)
    return parse_profile(load_yaml_mapping(path), str(path), path.stem, path.parent)


@dataclass(frozen=True)
class Delivery:
    """One outcome of a received message (a message can have several: duplicates)."""

    fate: int
    target_delay_ns: int
    deliver_ns: int                        # 0 when not delivered (test ``delivered``, not this)
    repeat_previous: bool = False          # freeze: send the held message instead

    @property
    def delivered(self) -> bool:
        """Whether the message goes out (``deliver_ns`` may be 0: a clock at time 0)."""
        return self.fate in SENT_FATES

    def payload(self, data: T, held: T | None) -> tuple[T, T | None]:
        """Return (what this delivery carries, the route's new held message).

        A freeze repeats the held message (the first one it meets, if none is held yet); a
        duplicate carries ``data`` but does not replace the held one.
        """
        if self.repeat_previous:
            held = data if held is None else held
            return held, held
        return data, (held if self.fate == DUPLICATE else data)


@dataclass
class RouteStats:
    """Counters of one route (for diagnostics)."""

    received: int = 0
    delivered: int = 0
    lost: int = 0
    duplicated: int = 0
    rate_dropped: int = 0
    repeated: int = 0

    def count(self, fate: int) -> None:
        """Count one delivery outcome."""
        if fate == DELIVERED:
            self.delivered += 1
        elif fate == LOST:
            self.lost += 1
        elif fate == DUPLICATE:
            self.duplicated += 1
            self.delivered += 1
        elif fate == RATE_DROPPED:
            self.rate_dropped += 1
        elif fate == REPEATED:
            self.repeated += 1
            self.delivered += 1


def route_stream_key(name: str) -> int:
    """Return a stable 32-bit key of a route name (its CRC-32).

    The RNG streams of a route depend on this key and the seed only, never on the route's
    position in the profile.
    """
    return zlib.crc32(name.encode('utf-8'))


class RouteState:
    """Run-time state of one route: its RNG streams, the burst state, the FIFO horizon.

    ``index`` is the route's position in the events topic's route list; the random streams are
    seeded from ``(seed, CRC-32 of the route name)``, so adding, removing or reordering other
    routes of a profile does not change this route's faults.
    """

    def __init__(self, config: RouteConfig, seed: int, index: int) -> None:
        self.config = config
        self.index = index
        key = [seed % 2**64, route_stream_key(config.name)]
        self._rng_delay = np.random.default_rng([*key, 1])
        self._rng_loss = np.random.default_rng([*key, 2])
        self.rng_values = np.random.default_rng([*key, 3])
        self._bad = False
        self._last_deliver_ns = 0
        self._last_pass_ns: int | None = None
        self._seq = 0
        self._draws: dict[int, list[float]] = {}
        self.start_ns: int | None = None
        self.stats = RouteStats()

    def _lost(self, loss: Loss) -> bool:
        rng = self._rng_loss
        if loss.model == 'bernoulli':
            return bool(rng.random() < loss.p)
        if loss.model == 'gilbert_elliott':
            if self._bad:
                self._bad = not rng.random() < loss.p_bad_to_good
            else:
                self._bad = bool(rng.random() < loss.p_good_to_bad)
            return bool(rng.random() < (loss.loss_bad if self._bad else loss.loss_good))
        return False

    def _draw(self, delay: Delay) -> float:
        """Next delay sample of ``delay``, drawn in blocks (one numpy call per 256)."""
        block = self._draws.get(id(delay))
        if not block:
            block = self._draws[id(delay)] = delay.sample(self._rng_delay, 256).tolist()[::-1]
        return block.pop()

    def _deliver_at(self, receive_ns: int, delay: Delay) -> tuple[int, int]:
        target = int(round(self._draw(delay) * NS))
        at = receive_ns + target
        if self.config.order == 'fifo':
            at = max(at, self._last_deliver_ns)
            self._last_deliver_ns = at
        return target, at

    def decide(self, receive_ns: int) -> tuple[int, list[Delivery]]:
        """Return ``(seq, deliveries)`` for a message received at ROS time ``receive_ns``.

        Route time (of the schedule) starts at the first message's ``receive_ns``; the node
        never passes the 0 of a sim clock that has not started (it holds such messages).
        """
        cfg = self.config
        seq = self._seq
        self._seq += 1
        self.stats.received += 1
        if self.start_ns is None:
            self.start_ns = receive_ns
        t_s = (receive_ns - self.start_ns) / NS
        delay, loss, freeze = cfg.delay, cfg.loss, False
        for f in cfg.schedule:
            if not f.active(t_s):
                continue
            if f.kind == 'outage':
                return seq, self._record([Delivery(LOST, 0, 0)])
            if f.kind == 'freeze':
                freeze = True
            elif f.kind == 'delay' and f.delay is not None:
                delay = f.delay
            elif f.kind == 'loss' and f.loss is not None:
                loss = f.loss
        if seq % cfg.decimate or (
                cfg.max_rate_hz > 0.0 and self._last_pass_ns is not None
                and receive_ns - self._last_pass_ns < NS / cfg.max_rate_hz * 0.999):
            return seq, self._record([Delivery(RATE_DROPPED, 0, 0)])
        self._last_pass_ns = receive_ns
        if self._lost(loss):
            return seq, self._record([Delivery(LOST, 0, 0)])
        target, at = self._deliver_at(receive_ns, delay)
        out = [Delivery(REPEATED if freeze else DELIVERED, target, at, freeze)]
        if cfg.duplicate_p > 0.0 and self._rng_loss.random() < cfg.duplicate_p:
            target2, at2 = self._deliver_at(receive_ns, delay)
            out.append(Delivery(DUPLICATE, target2, at2, freeze))
        return seq, self._record(out)

    def _record(self, out: list[Delivery]) -> list[Delivery]:
        for d in out:
            self.stats.count(d.fate)
        return out


class EventLog:
    """Ground-truth rows ``EVENT_COLUMNS``, batched for the events topic."""

    def __init__(self, route_names: Sequence[str]) -> None:
        self.route_names = list(route_names)
        self._rows: list[tuple[int, int, int, int, int, int]] = []

    def add(self, route: int, seq: int, receive_ns: int, d: Delivery) -> None:
        """Record one outcome."""
        self._rows.append((route, seq, receive_ns, d.target_delay_ns, d.deliver_ns, d.fate))

    def __len__(self) -> int:
        return len(self._rows)

    def take(self) -> list[tuple[int, int, int, int, int, int]]:
        """Return and clear the pending rows."""
        rows, self._rows = self._rows, []
        return rows

    @property
    def routes_label(self) -> str:
        """``layout.dim[0].label`` of the events message."""
        return 'routes=' + ','.join(self.route_names)


def decode_events(routes_label: str, data: Sequence[int]) -> tuple[list[str], Any]:
    """Decode one events message: route names and an ``(n, 6)`` int64 array of rows."""
    if not routes_label.startswith('routes='):
        raise ValueError(f'not an injector events label: {routes_label!r}')
    names = [n for n in routes_label[len('routes='):].split(',') if n]
    arr = np.asarray(data, dtype=np.int64)
    if arr.size % len(EVENT_COLUMNS):
        raise ValueError(f'events data of length {arr.size} is not a multiple of 6')
    return names, arr.reshape(-1, len(EVENT_COLUMNS))


def percentiles_ms(values_ns: Sequence[int], qs: Sequence[float] = (50, 99)) -> list[float]:
    """Percentiles of nanosecond values, in milliseconds (nan when empty)."""
    if not len(values_ns):
        return [math.nan for _ in qs]
    arr = np.asarray(values_ns, dtype=float) / 1e6
    return [float(np.percentile(arr, q)) for q in qs]


def scheduled_ns(rows: Any, orders: Mapping[int, str]) -> Any:
    """Return the scheduled delivery time of each sent row of an ``(n, 6)`` events array.

    ``orders`` maps a route index to its ``order`` (``fifo`` or ``free``; absent: ``fifo``).
    Free routes are due at ``receive + target``; a FIFO route is due no earlier than its
    previous delivery (:meth:`RouteState._deliver_at`), so its schedule is rebuilt in decision
    order (by sequence number, a duplicate after its original). Rows not sent get -1.
    """
    arr = np.asarray(rows, dtype=np.int64).reshape(-1, len(EVENT_COLUMNS))
    due = np.full(len(arr), -1, dtype=np.int64)
    sent = np.isin(arr[:, 5], list(SENT_FATES))
    for route in np.unique(arr[:, 0]):
        idx = np.flatnonzero((arr[:, 0] == route) & sent)
        at = arr[idx, 2] + arr[idx, 3]
        if orders.get(int(route), 'fifo') == 'fifo':
            order = np.lexsort((arr[idx, 5] == DUPLICATE, arr[idx, 1]))
            at[order] = np.maximum.accumulate(at[order])
        due[idx] = at
    return due


def injector_lateness_ns(rows: Any, orders: Mapping[int, str]) -> Any:
    """Return the injector's own lateness (sent - scheduled, ns) of every sent row.

    What a summary puts next to the injected latency (``deliver - receive``): the part of the
    delivered delay that the profile did not ask for.
    """
    arr = np.asarray(rows, dtype=np.int64).reshape(-1, len(EVENT_COLUMNS))
    due = scheduled_ns(arr, orders)
    sent = due >= 0
    return arr[sent, 4] - due[sent]


def lateness_summary(rows: Any, orders: Mapping[int, str]) -> dict[str, float]:
    """p50 / p99 / max of :func:`injector_lateness_ns` in ms, and the number of deliveries."""
    late = injector_lateness_ns(rows, orders)
    p50, p99, pmax = percentiles_ms(late.tolist(), (50, 99, 100))
    return {'lateness_p50_ms': p50, 'lateness_p99_ms': p99, 'lateness_max_ms': pmax,
            'deliveries': int(late.size)}
