"""What makes a bag self-describing: embedded config files with hashes, version, git revision."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
from pathlib import Path
import subprocess
from typing import Mapping

from simreal_ros.core.paths import share_dir
from simreal_ros.errors import ConfigError

#: Files larger than this are hashed but not embedded (custom_data lives in metadata.yaml).
MAX_EMBED_BYTES = 1_000_000

#: The ROS 2 distribution of each major version of the ``ros-rclpy`` PyPI wheel: the wheels
#: carry no distribution name (``ros-jazzy-rclpy`` pins ``ros-rclpy==7.1.6``, ``ros-kilted-rclpy``
#: ``ros-rclpy==9.1.2``).
RCLPY_MAJOR_DISTRO = {7: 'jazzy', 9: 'kilted'}


def ros_distro() -> str:
    """Return the ROS 2 distribution this interpreter's rclpy belongs to, without importing it.

    The PyPI wheels are named by the ``ros-rclpy`` version; a system (apt) install by the
    ``ROS_DISTRO`` its setup script exports; otherwise ``unknown``.
    """
    try:
        version = importlib.metadata.version('ros-rclpy')
    except importlib.metadata.PackageNotFoundError:
        return os.environ.get('ROS_DISTRO') or 'unknown'
    major = version.partition('.')[0]
    return RCLPY_MAJOR_DISTRO.get(int(major) if major.isdigit() else -1, f'rclpy {version}')


def embed_files(files: Mapping[str, str], source: str = 'embed') -> dict[str, str]:
    """Return custom_data entries for ``{key: file path}``.

    Each file gives ``<key>.path``, ``<key>.sha256`` and ``<key>`` (its text; binary or large
    files are hashed only). A path that does not exist raises ConfigError naming the key.
    Empty paths are skipped.
    """
    out: dict[str, str] = {}
    for key, value in files.items():
        if not value:
            continue
        p = Path(value).expanduser()
        if not p.is_file():
            raise ConfigError(source, f'embed {key}', 'a path to an existing file', value)
        data = p.read_bytes()
        out[f'{key}.path'] = str(p.resolve())
        out[f'{key}.sha256'] = hashlib.sha256(data).hexdigest()
        if len(data) <= MAX_EMBED_BYTES:
            try:
                out[key] = data.decode('utf-8')
            except UnicodeDecodeError:
                pass  # binary (weights): the hash identifies it
    return out


def git_revision(directory: Path | None = None) -> str:
    """Return the checkout's git revision (``<sha>``, ``<sha>-dirty`` or ``unknown``)."""
    try:
        where = directory or share_dir()
    except ConfigError:
        return 'unknown'
    try:
        sha = subprocess.run(['git', 'rev-parse', 'HEAD'], cwd=where, capture_output=True,
                             text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(['git', 'status', '--porcelain', '--untracked-files=no'],
                               cwd=where, capture_output=True, text=True, timeout=5,
                               check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return 'unknown'
    return f'{sha}-dirty' if dirty else (sha or 'unknown')
