"""Loading policy networks: TorchScript and ONNX, pickles refused, shapes checked."""

from __future__ import annotations

import os
from pathlib import Path
import pickle
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch

from simreal_ros.errors import PolicyError
from simreal_ros.policy.model import load_model
from simreal_ros.policy.spec import load_policy_spec


def mlp(i: int = 24, o: int = 6) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(i, 16), torch.nn.Tanh(), torch.nn.Linear(16, o))


def test_torchscript_loads_and_matches_the_module(tmp_path):
    m = mlp()
    p = tmp_path / 'net.pt'
    torch.jit.script(m).save(str(p))
    model = load_model(p, 24, 6)
    x = np.linspace(-1, 1, 24)
    expected = m(torch.tensor(x, dtype=torch.float32)[None]).detach().numpy()[0]
    np.testing.assert_allclose(model(x), expected, rtol=1e-6)
    assert model.format == 'torchscript' and model(x).dtype == np.float64


def test_traced_module_with_1d_output_loads(tmp_path):
    class Flat(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[0, :6] * 2.0
    p = tmp_path / 'flat.pt'
    torch.jit.trace(Flat(), torch.zeros(1, 24)).save(str(p))
    np.testing.assert_allclose(load_model(p, 24, 6)(np.ones(24)), np.full(6, 2.0))


@pytest.mark.parametrize('what', ['module', 'state_dict'])
def test_pickled_checkpoints_are_refused(tmp_path, what):
    m = mlp()
    p = tmp_path / 'ckpt.pt'
    torch.save(m if what == 'module' else m.state_dict(), p)
    with pytest.raises(PolicyError, match='pickled torch.save checkpoint.*arbitrary code'):
        load_model(p, 24, 6)


def test_legacy_pickle_files_are_refused_without_unpickling(tmp_path):
    marker = tmp_path / 'executed'
    p = tmp_path / 'evil.pt'

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), 'w'))
    p.write_bytes(pickle.dumps(Evil()))
    with pytest.raises(PolicyError, match='not a TorchScript archive'):
        load_model(p, 24, 6)
    assert not marker.exists()


def test_wrong_input_size_names_expected_and_actual(tmp_path):
    p = tmp_path / 'net.pt'
    torch.jit.script(mlp(30, 6)).save(str(p))
    with pytest.raises(PolicyError) as err:
        load_model(p, 24, 6)
    assert 'input shape mismatch' in str(err.value)
    assert '(1, 24)' in str(err.value) and '(1, 30)' in str(err.value)


def test_wrong_output_size_names_expected_and_actual(tmp_path):
    p = tmp_path / 'net.pt'
    torch.jit.script(mlp(24, 7)).save(str(p))
    with pytest.raises(PolicyError, match=r'action of shape \(1, 6\) but the network returns '
                                          r'\(1, 7\)'):
        load_model(p, 24, 6)


class _UnknownOpNet(torch.nn.Module):
    """A class of its own: TorchScript keeps the classes it compiled for the process."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x[:, :6])


def test_a_torchscript_archive_torch_cannot_load_keeps_torchs_reason(tmp_path):
    import zipfile
    ok, broken = tmp_path / 'ok.pt', tmp_path / 'broken.pt'
    torch.jit.save(torch.jit.script(_UnknownOpNet()), str(ok))
    with zipfile.ZipFile(ok) as zin, zipfile.ZipFile(broken, 'w') as zout:
        for name in zin.namelist():
            data = zin.read(name)
            if '/code/' in name and name.endswith('.py'):  # torch's text starts with '\n'
                data = data.replace(b'torch.relu', b'torch.no_such_op_xyz')
            zout.writestr(name, data)
    with pytest.raises(PolicyError) as err:
        load_model(broken, 24, 6)
    assert str(err.value) == (f'{broken}: torch.jit.load failed: Unknown builtin op: '
                              'aten::no_such_op_xyz.')


def test_missing_file_unknown_format_and_garbage(tmp_path):
    with pytest.raises(PolicyError, match='not found'):
        load_model(tmp_path / 'nope.pt', 24, 6)
    (tmp_path / 'net.h5').write_bytes(b'x')
    with pytest.raises(PolicyError, match='unknown model format'):
        load_model(tmp_path / 'net.h5', 24, 6)
    (tmp_path / 'junk.onnx').write_bytes(b'not onnx at all')
    with pytest.raises(PolicyError, match='onnxruntime could not load'):
        load_model(tmp_path / 'junk.onnx', 24, 6)


def export_onnx(path, i=24, o=6):
    m = mlp(i, o)
    torch.onnx.export(m, (torch.zeros(1, i),), str(path), dynamo=False,
                      input_names=['obs'], output_names=['action'])
    return m


def test_onnx_loads_and_matches_and_checks_shapes(tmp_path):
    p = tmp_path / 'net.onnx'
    m = export_onnx(p)
    model = load_model(p, 24, 6)
    x = np.linspace(-1, 1, 24)
    expected = m(torch.tensor(x, dtype=torch.float32)[None]).detach().numpy()[0]
    np.testing.assert_allclose(model(x), expected, rtol=1e-5, atol=1e-6)
    assert model.format == 'onnx'
    with pytest.raises(PolicyError, match=r'observation of shape \(1, 25\) but the network '
                                          r'takes \[1, 24\]'):
        load_model(p, 25, 6)
    with pytest.raises(PolicyError, match=r'action of shape \(1, 5\) but the network returns '
                                          r'\[1, 6\]'):
        load_model(p, 24, 5)


def test_onnx_without_onnxruntime_names_the_package(tmp_path):
    p = tmp_path / 'net.onnx'
    export_onnx(p)
    code = ('import sys; sys.modules["onnxruntime"] = None\n'
            'from simreal_ros.policy.model import load_model\n'
            'from simreal_ros.errors import PolicyError\n'
            'try:\n'
            f'    load_model({str(p)!r}, 24, 6)\n'
            'except PolicyError as e:\n'
            '    print(e)\n')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         timeout=60)
    assert 'need the onnxruntime package' in out.stdout and 'pip install onnxruntime' in \
        out.stdout, out.stderr


def test_shipped_policy_weights_match_their_spec():
    spec = load_policy_spec('simreal_arm_reach')
    assert spec.model.stat().st_size < 2 * 1024 * 1024
    model = load_model(spec.model, spec.obs_dim, spec.act_dim)
    out = model(np.zeros(spec.obs_dim))
    assert out.shape == (spec.act_dim,) and np.all(np.isfinite(out))
    # at the default pose with the goal there, the policy commands (about) the default pose
    assert np.abs(out * spec.action.scale).max() < 0.1


ARM_POLICIES = [('so101_reach', 'so101'), ('koch_reach', 'koch'),
                ('openmanipulator_x_reach', 'openmanipulator_x')]


@pytest.mark.parametrize('name,arm', ARM_POLICIES)
def test_shipped_arm_policy_loads_for_its_arm_and_steps_toward_the_goal(name, arm):
    from simreal_ros.core.robot import load_robot
    from simreal_ros.policy.codec import ActionProcessor, ObservationBuilder
    from simreal_ros.policy.terms import ObsInputs
    spec = load_policy_spec(name)
    robot = load_robot(arm)
    assert spec.robot == arm
    # the reach policy commands every joint of the arm, the gripper (last) included
    assert spec.joints == tuple(robot.joint_names) and spec.joints[-1] == 'gripper'
    np.testing.assert_allclose(spec.default, robot.home)
    assert spec.model.stat().st_size < 2 * 1024 * 1024
    model = load_model(spec.model, spec.obs_dim, spec.act_dim)
    obs = ObservationBuilder(spec)
    act = ActionProcessor(spec)
    act.reset(spec.default)
    # a plausible observation: at rest 0.05 rad off home, the goal 0.3 rad from home per
    # joint, towards the middle of its range (inside every arm's limits by 0.25 rad or more)
    q = spec.default + 0.05
    offset = np.where(spec.default < 0.5 * (spec.lower + spec.upper), 0.3, -0.3)
    goal = spec.default + offset
    inputs = ObsInputs(position=q, velocity=np.zeros(spec.n), default=spec.default,
                       last_action=act.neutral_action(), goal=goal)
    out = model(obs.build(inputs))
    assert out.shape == (spec.act_dim,) and np.all(np.isfinite(out))
    assert np.abs(out).max() < spec.action.reject_abs
    res = act.process(out)
    assert res.ok
    assert np.all(res.target >= spec.lower) and np.all(res.target <= spec.upper)
    # every joint's command moves from home towards its goal: the teacher's label is the
    # goal plus the gravity term tau/kp, at most ~0.1 rad on these arms (60 % of the effort
    # limit over kp: Koch wrist_flex 0.6 x 0.5 / 3), so each step is 0.2-0.4 rad
    step = out * spec.action.scale
    assert np.all(np.sign(step) == np.sign(offset)), (step, offset)
    assert np.all(np.abs(step) > 0.1), step


def _tasks() -> set[int]:
    return {int(p.name) for p in Path('/proc/self/task').iterdir()}


@pytest.mark.skipif(not Path('/proc/self/task').is_dir() or (os.cpu_count() or 1) < 2,
                    reason='needs /proc and 2 CPUs (one thread per core is the default team)')
def test_a_call_from_another_thread_starts_no_worker_thread():
    # the policy node calls the network from its loop thread, not the one that loaded it:
    # OpenMP's thread count is per thread, and a team of one thread per core (a spinning
    # worker at the loop's priority) started there before the count was set in the caller
    spec = load_policy_spec('simreal_quad_walk')
    model = load_model(spec.model, spec.obs_dim, spec.act_dim, threads=1)
    seen: dict[str, set[int]] = {}

    def loop() -> None:
        before = _tasks()
        for _ in range(3):
            model(np.zeros(spec.obs_dim))
        seen['new'] = _tasks() - before

    t = threading.Thread(target=loop)
    t.start()
    t.join()
    assert seen['new'] == set()
