"""A policy zoo: named variants of one training recipe, built with ``simreal train``'s trainer.

Format (YAML)::

    name: simreal_arm                 # [default: the file's stem]
    base: simreal_arm_reach           # training config (config/training/) every entry starts from
    policies: ../policies/zoo         # where the built zoo lives, relative to this file
    entries:                          # at least 2, names unique ([A-Za-z0-9_-]+)
      - {name: rand_lat_5, train: {iterations: 5}}
      - {name: norand_nolat_5, train: {iterations: 5, randomization: '', latency_presets: [none]}}

``train:`` holds overrides of the base config's fields (any :class:`TrainConfig` field except
``source``; ``latency_presets`` as in the config file), checked when the zoo is loaded.
``simreal zoo build ZOO --out DIR`` trains entry ``NAME`` into ``DIR/NAME/`` (its model, its
spec copy and ``<policy>.training.json``, as ``simreal train --out`` writes them); an entry
whose directory already has its spec and model is skipped, so an interrupted build resumes.
:func:`entry_spec` is where an entry's policy spec is in a built zoo.

Every error is one :class:`ConfigError` naming the zoo file and the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
import re
import time
from typing import Any, Callable

from simreal_ros.core.paths import resolve_named
from simreal_ros.core.validate import Section, load_yaml_mapping
from simreal_ros.errors import ConfigError

_NAME = re.compile(r'^[A-Za-z0-9_-]+$')


@dataclass(frozen=True)
class ZooEntry:
    """One policy of the zoo: its name and the training overrides."""

    name: str
    train: dict[str, Any]


@dataclass(frozen=True)
class Zoo:
    """A checked zoo file."""

    source: str
    name: str
    base: str
    policies_dir: Path
    entries: tuple[ZooEntry, ...]


def load_zoo(path: str | Path) -> Zoo:
    """Read and check a zoo file (a path, or a name in ``config/zoo/``); ConfigError if bad.

    Every entry's overrides are applied to the base training config here, so a zoo that loads
    builds (or fails while training, not on a typo).
    """
    from simreal_ros.policy.train import load_train_config
    p = resolve_named('zoo', str(path))
    src = str(p)
    top = Section(load_yaml_mapping(p), src)
    name = top.string('name', p.stem)
    base = top.string('base')
    try:
        load_train_config(base)
    except ConfigError as exc:
        raise ConfigError(src, 'base', f'a training config that loads ({exc})', base) from None
    pol = Path(top.string('policies', 'zoo')).expanduser()
    policies_dir = pol if pol.is_absolute() else (p.parent / pol).resolve()
    raw = top.items('entries')
    if len(raw) < 2:
        raise ConfigError(src, 'entries', 'a list of at least 2 entries (a zoo ranks '
                          'policies)', len(raw))
    seen: set[str] = set()
    entries = []
    for i, item in enumerate(raw):
        sec = Section(item, src, f'entries[{i}]')
        ename = sec.unique_string('name', seen, 'entry name')
        if not _NAME.match(ename):
            raise ConfigError(src, sec.path('name'), 'a name of letters, digits, _ and -',
                              ename)
        over = sec.raw('train', {}) or {}
        if not isinstance(over, dict):
            raise ConfigError(src, sec.path('train'), 'a mapping of training overrides', over)
        sec.reject_unknown()
        try:
            load_train_config(base, **over)
        except ConfigError as exc:
            raise ConfigError(src, f'{sec.path("train")}.{exc.key}', exc.expected,
                              exc.got) from None
        entries.append(ZooEntry(ename, dict(over)))
    top.reject_unknown()
    return Zoo(src, name, base, policies_dir, tuple(entries))


def entry_spec(zoo: Zoo, entry: ZooEntry, policies_dir: Path | None = None) -> Path:
    """Return the path of ``entry``'s policy spec in a built zoo (``policies_dir/NAME/``)."""
    from simreal_ros.policy.train import load_train_config
    cfg = load_train_config(zoo.base)
    return (policies_dir or zoo.policies_dir) / entry.name / f'{Path(cfg.policy).stem}.yaml'


def check_built(zoo: Zoo, policies_dir: Path | None = None) -> dict[str, Path]:
    """Return every entry's spec path; ConfigError naming the first entry not built."""
    from simreal_ros.policy.spec import load_policy_spec
    out = {}
    for i, e in enumerate(zoo.entries):
        spec_path = entry_spec(zoo, e, policies_dir)
        if not spec_path.is_file():
            raise ConfigError(zoo.source, f'entries[{i}]', f'a built policy at {spec_path} '
                              f'(simreal zoo build {zoo.source} --out DIR)', e.name)
        spec = load_policy_spec(str(spec_path))
        if not Path(spec.model).is_file():
            raise ConfigError(zoo.source, f'entries[{i}]', f'a built policy whose model '
                              f'exists ({spec.model})', e.name)
        out[e.name] = spec_path
    return out


def build_zoo(zoo: Zoo, out_dir: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train every entry not built yet into ``out_dir/NAME/``; return per entry its summary."""
    from simreal_ros.policy.train import load_train_config, train
    out_dir.mkdir(parents=True, exist_ok=True)
    done: dict[str, Any] = {}
    t0 = time.monotonic()
    for k, e in enumerate(zoo.entries):
        spec_path = entry_spec(zoo, e, out_dir)
        cfg = load_train_config(zoo.base, **e.train)
        model = spec_path.with_suffix('.pt')
        if spec_path.is_file() and model.is_file():
            log(f'[{k + 1}/{len(zoo.entries)}] {e.name}: built before, skipped')
            done[e.name] = {'skipped': True}
            continue
        log(f'[{k + 1}/{len(zoo.entries)}] {e.name}: training {e.train or "(base)"}')
        summary = train(cfg, out_dir / e.name, log=lambda line: log(f'  {line}'))
        done[e.name] = {'train_time_s': summary['train_time_s'],
                        'check_nominal': summary.get('check_nominal', {}).get('success_rate'),
                        'check_randomized': summary.get('check_randomized', {})
                        .get('success_rate')}
    log(f'zoo {zoo.name}: {len(zoo.entries)} entries in {out_dir} '
        f'({time.monotonic() - t0:.0f} s)')
    return done
