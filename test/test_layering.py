"""The package's layers, enforced: a module imports only from its own layer or lower ones.

=========  ==============================================================================
layer      may import (besides the standard library and third-party packages)
=========  ==============================================================================
errors     nothing of simreal_ros
core       errors; never rclpy, mujoco, torch or cv2 (pure Python + numpy, testable anywhere)
bag        core; rosbag2 through rosbags (never rclpy, mujoco, torch or cv2)
gap        bag, core; gap metrics and data quality (never rclpy, mujoco, torch or cv2)
latency    bag, core; the injector's model (never rclpy, mujoco, torch or cv2)
teleop     gap, core; the leader's mapping and demonstration quality (same ban)
sim        core; the physics engines live here
hardware   sim, core (the virtual servo bus runs a simulated arm as its reality); inside it,
           ``hardware.dynamixel`` and ``hardware.feetech`` (the real buses) never import
           ``hardware.emulator``, which may import them (it speaks the real wire protocols)
policy     sim, core (training runs in the simulation); ``policy.spec``, ``policy.terms``,
           ``policy.codec`` and ``policy.control`` never import torch (the planner and the
           node's control read them)
sysid      policy, hardware, sim, core (fits replay the simulation)
ros        core; shared ROS glue (messages, QoS, clients), never the planner or nodes
nodes      ros and everything below: one thin Node per module
report     nodes and below (``simreal record`` starts the recorder node)
sweep      report and below, but never rclpy, ``ros`` or ``nodes``: a sweep's cells run the
           policy in-process (``policy.env``), on worker processes or Ray, without ROS
bringup    report and below: the planner and the launcher, nothing else
jobs       bringup and below: the flywheel, eval and the demo (whole launches)
cli        everything
=========  ==============================================================================

Function-level (lazy) imports count too: a lazy import is still a dependency.

Engines: only ``sim/mujoco/`` imports ``mujoco`` and only ``sim/bullet/`` imports ``pybullet``
(everything else goes through the engine protocol, ``sim/backend.py``), so either engine can
stand in for the other. The one exception,
``sysid/fit.py``, imports ``mujoco.sysid`` and ``mujoco.minimize``: an optimizer, not physics
(its docstring says why).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / 'simreal_ros'
ORDER = ['errors', 'core', 'bag', 'gap', 'latency', 'teleop', 'sim', 'hardware', 'policy',
         'sysid', 'ros', 'nodes', 'report', 'sweep', 'bringup', 'jobs', 'cli']
# same-rank layers that must not import each other
PEERS = {frozenset({'hardware', 'policy'}), frozenset({'gap', 'latency'}),
         frozenset({'latency', 'teleop'})}
RANK = {name: i for i, name in enumerate(ORDER)}
RANK['__main__'] = RANK['__init__'] = RANK['cli']
FORBIDDEN_IN_CORE = ('rclpy', 'mujoco', 'pybullet', 'torch', 'cv2')
#: layers (and modules) that must stay free of the heavy imports, as core is
PURE = ('core', 'bag', 'gap', 'latency', 'teleop')
PURE_MODULES = ('policy/spec.py', 'policy/terms.py', 'policy/codec.py', 'policy/control.py')
#: modules (relative to the package) that may import mujoco: the engine and the documented
#: exception
MUJOCO_ALLOWED = ('sim/mujoco/', 'sysid/fit.py')
#: sub-package -> the sub-packages of the same layer it must not import: the real driver side
#: must work on a machine where the emulator (and its MuJoCo reality) is never loaded
FORBIDDEN_WITHIN = {'hardware.dynamixel': ('hardware.emulator',),
                    'hardware.feetech': ('hardware.emulator',)}
PYBULLET_ALLOWED = ('sim/bullet/',)
#: layer -> what it must not import although it ranks above: ROS-free layers above ``ros``
NO_ROS = {'sweep': ('rclpy', 'simreal_ros.ros', 'simreal_ros.nodes')}


def layer_of(path: Path, root: Path) -> str:
    rel = path.relative_to(root)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, the names imported from it: empty for ``import module``)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module, [a.name for a in node.names]))
    return out


def violations(root: Path = PKG) -> list[str]:
    bad = []
    for path in sorted(root.rglob('*.py')):
        src = layer_of(path, root)
        for line, mod, names in imports(path):
            top = mod.split('.')[0]
            where = f'{path.relative_to(root.parent)}:{line}'
            rel = path.relative_to(root).as_posix()
            if (src in PURE or rel in PURE_MODULES) and top in FORBIDDEN_IN_CORE:
                bad.append(f'{where}: {src} imports {mod}')
            elif top == 'mujoco' and not path.relative_to(root).as_posix().startswith(
                    MUJOCO_ALLOWED):
                bad.append(f'{where}: imports {mod} outside sim/mujoco/ (use the engine '
                           f'protocol, sim/backend.py)')
            elif top == 'pybullet' and not path.relative_to(root).as_posix().startswith(
                    PYBULLET_ALLOWED):
                bad.append(f'{where}: imports {mod} outside sim/bullet/ (use the engine '
                           f'protocol, sim/backend.py)')
            for banned in NO_ROS.get(src, ()):
                if f'{mod}.'.startswith(f'{banned}.') or any(
                        f'{mod}.{n}.'.startswith(f'{banned}.') for n in names):
                    bad.append(f'{where}: {src} imports {mod} ({src} runs without ROS)')
                    break
            if top != 'simreal_ros' or mod == 'simreal_ros':
                continue
            sub = '.'.join(path.relative_to(root).parts[:2])
            for banned in FORBIDDEN_WITHIN.get(sub, ()):
                for full in [mod, *(f'{mod}.{n}' for n in names)]:
                    if f'{full}.'.startswith(f'simreal_ros.{banned}.'):
                        bad.append(f'{where}: {sub} imports {full} '
                                   f'({banned} is not below {sub})')
                        break
            dst = mod.split('.')[1]
            if dst == src or dst not in RANK:
                continue
            if RANK[dst] > RANK[src] or frozenset({src, dst}) in PEERS:
                bad.append(f'{where}: {src} imports {mod} ({dst} is not below {src})')
    return bad


def test_every_layer_imports_only_downwards():
    assert violations() == []


def test_mujoco_in_its_engine_package_and_the_fit_is_allowed(tmp_path):
    root = tmp_path / 'simreal_ros'
    for module in ('sim/mujoco/physics.py', 'sysid/fit.py'):
        (root / module).parent.mkdir(parents=True, exist_ok=True)
        (root / module).write_text('import mujoco\nfrom mujoco import rollout\n')
    assert violations(root) == []


def test_pybullet_outside_its_engine_package_is_a_violation(tmp_path):
    root = tmp_path / 'simreal_ros'
    for module in ('sim/bullet/model.py', 'policy/env.py'):
        (root / module).parent.mkdir(parents=True, exist_ok=True)
        (root / module).write_text('import pybullet\n')
    assert violations(root) == ['simreal_ros/policy/env.py:1: imports pybullet outside '
                                'sim/bullet/ (use the engine protocol, sim/backend.py)']


def module_graph(root: Path = PKG) -> dict[str, set[str]]:
    """Module -> the package modules it imports (module level and lazy)."""
    mods = {}
    for path in root.rglob('*.py'):
        name = '.'.join(path.relative_to(root.parent).with_suffix('').parts)
        mods[name.removesuffix('.__init__')] = path
    graph = {}
    for name, path in mods.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps |= {m for m in [node.module, *(f'{node.module}.{a.name}'
                                                    for a in node.names)] if m in mods}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in mods}
        graph[name] = deps - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while (w := stack.pop()) != v:
                comp.append(w)
            if comp:
                out.append(sorted([v, *comp]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    assert cycles(module_graph()) == []


def test_an_import_cycle_is_caught(tmp_path):
    root = tmp_path / 'simreal_ros'
    (root / 'bringup').mkdir(parents=True)
    (root / 'bringup' / 'a.py').write_text('from simreal_ros.bringup import b\n')
    (root / 'bringup' / 'b.py').write_text('def f():\n    from simreal_ros.bringup.a import x\n')
    assert cycles(module_graph(root)) == [['simreal_ros.bringup.a', 'simreal_ros.bringup.b']]


def test_every_package_has_a_layer():
    packages = {p.name for p in PKG.iterdir() if p.is_dir() and (p / '__init__.py').exists()}
    assert packages <= set(ORDER), packages - set(ORDER)


@pytest.mark.parametrize('module,src,line', [
    ('core/x.py', 'import rclpy\n', 'core imports rclpy'),
    ('core/x.py', 'def f():\n    from mujoco import MjData\n', 'core imports mujoco'),
    ('ros/x.py', 'from simreal_ros.bringup.planner import NodeSpec\n',
     'ros imports simreal_ros.bringup.planner (bringup is not below ros)'),
    ('hardware/x.py', 'from simreal_ros.policy import model\n',
     'hardware imports simreal_ros.policy (policy is not below hardware)'),
    ('nodes/x.py', 'def f():\n    import mujoco\n',
     'imports mujoco outside sim/mujoco/ (use the engine protocol, sim/backend.py)'),
    ('sim/goals.py', 'from mujoco import MjData\n',
     'imports mujoco outside sim/mujoco/ (use the engine protocol, sim/backend.py)'),
    ('sweep/x.py', 'def f():\n    import rclpy\n', 'sweep imports rclpy (sweep runs without ROS)'),
    ('sweep/x.py', 'from simreal_ros import ros\n',
     'sweep imports simreal_ros (sweep runs without ROS)'),
    ('sweep/x.py', 'from simreal_ros.nodes.policy import PolicyNode\n',
     'sweep imports simreal_ros.nodes.policy (sweep runs without ROS)'),
    ('hardware/dynamixel/x.py', 'def f():\n    from simreal_ros.hardware.emulator import e\n',
     'hardware.dynamixel imports simreal_ros.hardware.emulator '
     '(hardware.emulator is not below hardware.dynamixel)'),
    ('hardware/dynamixel/x.py', 'from simreal_ros.hardware import emulator\n',
     'hardware.dynamixel imports simreal_ros.hardware.emulator '
     '(hardware.emulator is not below hardware.dynamixel)'),
    ('hardware/dynamixel/x.py', 'import simreal_ros.hardware.emulator.reality\n',
     'hardware.dynamixel imports simreal_ros.hardware.emulator.reality '
     '(hardware.emulator is not below hardware.dynamixel)'),
])
def test_an_upward_import_is_caught(tmp_path, module, src, line):
    root = tmp_path / 'simreal_ros'
    (root / module).parent.mkdir(parents=True)
    (root / module).write_text(src, encoding='utf-8')
    found = violations(root)
    assert len(found) == 1 and found[0].endswith(line), found


def test_the_emulator_may_import_the_real_side(tmp_path):
    root = tmp_path / 'simreal_ros'
    (root / 'hardware' / 'emulator').mkdir(parents=True)
    (root / 'hardware' / 'emulator' / 'x.py').write_text(
        'from simreal_ros.hardware.dynamixel import protocol\n', encoding='utf-8')
    assert violations(root) == []
