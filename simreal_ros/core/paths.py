"""Locate the package's data files (config/, urdf/, launch/) in a checkout or an install."""

from __future__ import annotations

from functools import lru_cache
import os
from pathlib import Path
import sys

from simreal_ros.errors import ConfigError

PACKAGE = 'simreal_ros'


@lru_cache(maxsize=1)
def share_dir() -> Path:
    """Return the directory that holds ``config/``, ``urdf/`` and ``launch/``.

    Order: ``SIMREAL_SHARE_DIR``; the source checkout this module was imported from (editable
    installs and ``colcon build --symlink-install``); the ament index (``colcon build`` and
    system installs); ``<prefix>/share/simreal_ros`` of the running interpreter.
    """
    env = os.environ.get('SIMREAL_SHARE_DIR')
    if env:
        return Path(env)
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / 'package.xml').is_file() and (checkout / 'config').is_dir():
        return checkout
    try:
        from ament_index_python.packages import get_package_share_directory
        return Path(get_package_share_directory(PACKAGE))
    except Exception:  # noqa: BLE001 - not installed through ament; fall through
        pass
    prefix_share = Path(sys.prefix) / 'share' / PACKAGE
    if (prefix_share / 'config').is_dir():
        return prefix_share
    raise ConfigError(PACKAGE, 'share directory',
                      'config/ and urdf/ installed with the package (pip install . or colcon '
                      'build), or SIMREAL_SHARE_DIR set to a checkout', has_got=False)


def resolve_named(kind: str, value: str, suffixes: tuple[str, ...] = ('.yaml', '.yml')) -> Path:
    """Resolve a config given as a path or as a name under ``config/<kind>/``.

    ``resolve_named('robots', 'simreal_arm')`` -> ``<share>/config/robots/simreal_arm.yaml``.
    """
    p = Path(value).expanduser()
    if p.is_file():
        return p.absolute()  # errors and the nodes' parameters name the full path
    if os.sep not in value and not p.suffix:
        base = share_dir() / 'config' / kind
        for s in suffixes:
            cand = base / f'{value}{s}'
            if cand.is_file():
                return cand
        names = sorted(x.stem for x in base.glob('*.y*ml')) if base.is_dir() else []
        raise ConfigError(f'config/{kind}', value,
                          f'a file path or one of the shipped names {names}', value)
    raise ConfigError(str(p.absolute()), '', 'an existing file', 'no such file')


def resolve_data_file(value: str, relative_to: Path | None = None) -> Path:
    """Resolve a data file path: absolute, relative to ``relative_to``, or to the share dir."""
    p = Path(value).expanduser()
    if p.is_absolute():
        return p
    if relative_to is not None and (relative_to / p).exists():
        return relative_to / p
    return share_dir() / p
