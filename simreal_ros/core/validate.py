"""Small typed accessors for YAML mappings that fail with the file, the key and the expectation."""

from __future__ import annotations

from dataclasses import fields
import math
from pathlib import Path
from typing import Any, ClassVar, Iterable, Mapping, Sequence, TypeVar

import yaml

from simreal_ros.errors import ConfigError

_MISSING = object()
T = TypeVar('T')


def load_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """Read a YAML file whose top level must be a mapping.

    Every way a file can be wrong is one ConfigError naming the file: missing, not UTF-8 text
    (a ``.pt`` weights file given where a spec is expected), not YAML, not a mapping.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(str(p), '', 'an existing YAML file', 'no such file')
    raw = p.read_bytes()
    try:
        text = raw.decode('utf-8')
    except UnicodeDecodeError as exc:
        raise ConfigError(str(p), '', 'a UTF-8 YAML text file',
                          f'binary data (byte 0x{raw[exc.start]:02x} at offset {exc.start} '
                          f'is not UTF-8)') from None
    if '\x00' in text:
        raise ConfigError(str(p), '', 'a UTF-8 YAML text file',
                          f'binary data (a NUL byte at offset {text.index(chr(0))})')
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(str(p), '', 'valid YAML', _yaml_problem(exc)) from None
    if not isinstance(data, dict):
        raise ConfigError(str(p), '', 'a mapping at the top level', type(data).__name__)
    return data


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """One line: the parser's problem and where (``... at line 3, column 7``)."""
    problem = getattr(exc, 'problem', None) or str(exc).splitlines()[0]
    mark = getattr(exc, 'problem_mark', None)
    where = f' at line {mark.line + 1}, column {mark.column + 1}' if mark is not None else ''
    return f'{problem}{where}'


class Section:
    """A mapping read from ``source`` at dotted ``key``, with typed getters.

    Every getter records the key it read; :meth:`reject_unknown` then fails on any key that no
    getter asked for, which catches typos such as ``dampng``.
    """

    def __init__(self, data: Any, source: str, key: str = '') -> None:
        if not isinstance(data, Mapping):
            raise ConfigError(source, key or '<top>', 'a mapping', data)
        self.data = data
        self.source = source
        self.key = key
        self._seen: set[str] = set()

    def path(self, name: str) -> str:
        """Return the dotted path of ``name`` inside this section."""
        return f'{self.key}.{name}' if self.key else name

    def has(self, name: str) -> bool:
        """Return whether ``name`` is present."""
        return name in self.data

    def raw(self, name: str, default: Any = _MISSING) -> Any:
        """Return the raw value, or ``default``; fail if required and absent."""
        self._seen.add(name)
        if name in self.data:
            return self.data[name]
        if default is _MISSING:
            raise ConfigError(self.source, self.path(name), 'this key to be present',
                              'missing')
        return default

    def string(self, name: str, default: Any = _MISSING) -> str:
        """Return a non-empty string."""
        v = self.raw(name, default)
        if not isinstance(v, str) or not v:
            raise ConfigError(self.source, self.path(name), 'a non-empty string', v)
        return v

    def unique_string(self, name: str, seen: set[str], what: str) -> str:
        """Return a non-empty string not in ``seen`` (then added), e.g. a joint's name."""
        v = self.string(name)
        if v in seen:
            raise ConfigError(self.source, self.path(name), f'{what} not used before', v)
        seen.add(v)
        return v

    def number(self, name: str, default: Any = _MISSING, *, minimum: float | None = None,
               maximum: float | None = None, positive: bool = False) -> float:
        """Return a finite float within the given bounds."""
        v = self.raw(name, default)
        return check_number(v, self.source, self.path(name), minimum=minimum, maximum=maximum,
                            positive=positive)

    def integer(self, name: str, default: Any = _MISSING, *, minimum: int | None = None,
                maximum: int | None = None) -> int:
        """Return an integer within the given bounds (bools are not integers here)."""
        v = self.raw(name, default)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(self.source, self.path(name), 'an integer', v)
        if (minimum is not None and v < minimum) or (maximum is not None and v > maximum):
            raise ConfigError(self.source, self.path(name),
                              f'an integer in [{minimum}, {maximum}]', v)
        return v

    def boolean(self, name: str, default: Any = _MISSING) -> bool:
        """Return a bool."""
        v = self.raw(name, default)
        if not isinstance(v, bool):
            raise ConfigError(self.source, self.path(name), 'true or false', v)
        return v

    def section(self, name: str, default: Any = _MISSING) -> 'Section':
        """Return a nested mapping as a Section."""
        v = self.raw(name, default)
        return Section(v, self.source, self.path(name))

    def items(self, name: str, default: Any = _MISSING) -> Sequence[Any]:
        """Return a list."""
        v = self.raw(name, default)
        if not isinstance(v, list):
            raise ConfigError(self.source, self.path(name), 'a list', v)
        return v

    def reject_unknown(self, extra_allowed: Sequence[str] = ()) -> None:
        """Fail on keys that no getter read."""
        unknown = sorted(str(k) for k in self.data if k not in self._seen
                         and k not in extra_allowed)
        if unknown:
            known = ', '.join(sorted(self._seen | set(extra_allowed)))
            raise ConfigError(self.source, self.path(unknown[0]),
                              f'one of the known keys ({known})', 'unknown key')


def key_numbers(parts: Iterable[str], known: Sequence[str], source: str, *,
                finite: bool = False) -> dict[str, float]:
    """Parse ``key=number`` command-line parts (``crc=0.01``) with keys among ``known``.

    Empty parts are skipped; a part without ``=``, with an unknown key or a value that is not
    a number (with ``finite``: not a finite one) is a ConfigError naming ``source`` (the
    option) and the part or key.
    """
    values: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in parts)):
        key, sep, raw = part.partition('=')
        if not sep or key not in known:
            raise ConfigError(source, part, f'key=value with a key among {list(known)}',
                              has_got=False)
        try:
            values[key] = float(raw)
        except ValueError:
            raise ConfigError(source, key, 'a number', raw) from None
        if finite and not math.isfinite(values[key]):
            raise ConfigError(source, key, 'a finite number', raw)
    return values


def check_number(v: Any, source: str, key: str, *, minimum: float | None = None,
                 maximum: float | None = None, positive: bool = False) -> float:
    """Check that ``v`` is a finite real number within bounds and return it as float."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError(source, key, 'a number', v)
    f = float(v)
    if not math.isfinite(f):
        raise ConfigError(source, key, 'a finite number', v)
    if positive and f <= 0.0:
        raise ConfigError(source, key, 'a number > 0', v)
    if minimum is not None and f < minimum:
        raise ConfigError(source, key, f'a number >= {minimum}', v)
    if maximum is not None and f > maximum:
        raise ConfigError(source, key, f'a number <= {maximum}', v)
    return f


def check_range(v: Any, source: str, key: str, *, minimum: float | None = None
                ) -> tuple[float, float]:
    """Check a ``[low, high]`` pair with low <= high."""
    if not isinstance(v, (list, tuple)) or len(v) != 2:
        raise ConfigError(source, key, 'a [low, high] pair', v)
    lo = check_number(v[0], source, f'{key}[0]', minimum=minimum)
    hi = check_number(v[1], source, f'{key}[1]', minimum=minimum)
    if lo > hi:
        raise ConfigError(source, key, 'low <= high', v)
    return lo, hi


def dataclass_from_mapping(cls: type[T], values: Mapping[str, Any], source: str) -> T:
    """Build dataclass ``cls`` from a mapping, rejecting unknown keys and wrong types."""
    known = {f.name: f for f in fields(cls)}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in known:
            raise ConfigError(source, key, f'one of {sorted(known)}', 'unknown key')
        default = known[key].default
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif isinstance(default, float):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            value = float(value) if ok else value
        elif isinstance(default, tuple):  # a string array parameter
            ok = isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
            value = tuple(value) if ok else value
            if not ok:
                raise ConfigError(source, key, 'a list of strings', value)
        else:
            ok = isinstance(value, str)
        if not ok:
            raise ConfigError(source, key, f'a {type(default).__name__}', value)
        kwargs[key] = value
    return cls(**kwargs)


def check_count(v: object, source: str, key: str, minimum: int) -> int:
    """Check an integer (not a bool) of at least ``minimum``."""
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ConfigError(source, key, f'an integer >= {minimum}', v)
    return v


class FromMapping:
    """``from_mapping``: build the dataclass from a mapping, rejecting unknown keys and bad types.

    Every node's config class has it: the node builds its class from the ROS parameters it read
    back, the planner from the parameters it is about to pass. ``SOURCE`` names the settings in
    errors (the node kind) unless the caller names a file.
    """

    SOURCE: ClassVar[str] = ''

    @classmethod
    def from_mapping(cls: type[T], values: Mapping[str, Any], source: str = '') -> T:
        """Build from ``values``; errors name ``source`` or the class's ``SOURCE``."""
        return dataclass_from_mapping(cls, values, source or cls.SOURCE)  # type: ignore[attr-defined]


#: The most characters of one text taken from input that reaches a log line or ``/diagnostics``:
#: a JointState command with 200,000 repeated names made a 2.4 MB rejection reason, logged and
#: published on /diagnostics every second.
TEXT_LIMIT = 300


def bounded(text: str, limit: int = TEXT_LIMIT) -> str:
    """Return ``text``, cut to ``limit`` characters with the length it had when longer."""
    if len(text) <= limit:
        return text
    tail = f'... ({len(text)} characters)'
    return text[:max(0, limit - len(tail))] + tail

