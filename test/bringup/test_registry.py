"""One declaration per node: setup.py, the planner and the docs agree with the registry."""

from __future__ import annotations

import ast
from pathlib import Path
import runpy
import sys
from typing import Any

import pytest
import setuptools

from simreal_ros.bringup.registry import (
    KINDS,
    REGISTRY,
    TABLE_BEGIN,
    TABLE_END,
    config_class,
    console_scripts,
    markdown_table,
)
from simreal_ros.bringup.spec import NODES, NodeSpec
from simreal_ros.core.validate import FromMapping

REPO = Path(__file__).resolve().parents[2]


def setup_kwargs(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Run setup.py as colcon and pip do, with setup() recording its arguments."""
    seen: dict[str, Any] = {}
    monkeypatch.setattr(setuptools, 'setup', lambda **kw: seen.update(kw))
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(sys, 'argv', ['setup.py'])
    runpy.run_path(str(REPO / 'setup.py'), run_name='__main__')
    return seen


def test_setup_py_console_scripts_are_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    scripts = setup_kwargs(monkeypatch)['entry_points']['console_scripts']
    assert scripts == console_scripts()
    assert scripts[0] == 'simreal = simreal_ros.cli:main'
    assert sorted(scripts[1:]) == sorted(f'{k.script} = {k.module}:main' for k in REGISTRY)


def test_the_planner_reads_the_registry() -> None:
    assert NODES == {k.kind: (k.script, k.module) for k in REGISTRY}
    spec = NodeSpec('policy', 'policy')
    assert (spec.executable, spec.module) == ('simreal_policy', 'simreal_ros.nodes.policy')


def test_kinds_scripts_and_modules_are_unique_and_exist() -> None:
    assert len(KINDS) == len(REGISTRY)
    assert len({k.script for k in REGISTRY}) == len(REGISTRY)
    for k in REGISTRY:
        assert k.script == f'simreal_{k.kind}'
        assert (REPO / (k.module.replace('.', '/') + '.py')).is_file(), k.module


@pytest.mark.parametrize('kind', sorted(KINDS))
def test_the_config_class_is_the_one_the_node_builds(kind: str) -> None:
    cls = config_class(kind)
    assert issubclass(cls, FromMapping)
    source = (REPO / (KINDS[kind].module.replace('.', '/') + '.py')).read_text()
    assert f'{cls.__name__}.from_mapping(' in source


def test_the_docs_table_is_the_registry() -> None:
    text = (REPO / 'docs' / 'architecture.md').read_text(encoding='utf-8')
    assert text.count(TABLE_BEGIN) == 1 and text.count(TABLE_END) == 1
    table = text.split(TABLE_BEGIN)[1].split(TABLE_END)[0].strip()
    assert table == markdown_table()


def test_the_registry_imports_only_the_standard_library() -> None:
    """setup.py loads it by path, where simreal_ros and its dependencies may be missing."""
    tree = ast.parse((REPO / 'simreal_ros' / 'bringup' / 'registry.py').read_text())
    modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert modules == {'__future__', 'dataclasses', 'importlib', 'typing'}


def test_there_is_one_from_mapping() -> None:
    defined = [str(p.relative_to(REPO)) for p in sorted((REPO / 'simreal_ros').rglob('*.py'))
               if 'def from_mapping(' in p.read_text(encoding='utf-8')]
    assert defined == ['simreal_ros/core/validate.py']
