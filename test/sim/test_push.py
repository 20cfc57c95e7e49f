"""Timed pushes on the floating base (sim/push.py) in MuJoCo and PyBullet, in-process."""

from __future__ import annotations

import numpy as np
import pytest

from simreal_ros.core.dynamics import Randomization
from simreal_ros.core.pushes import PushRanges
from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ConfigError
from simreal_ros.sim.engines import make_sim
from simreal_ros.sim.push import MAX_PUSH_S, PushSchedule, check_push

G = 9.81
ROBOT = load_robot('simreal_quad')
MASS_KG = 1.84  # the URDF's links summed (test_quadruped.py checks it)


@pytest.mark.parametrize('engine', ['mujoco', 'pybullet'])
def test_an_upward_push_gives_the_impulse_for_exactly_its_duration(engine):
    """4 m g up for 0.1 s: +3 g for 0.1 s (2.94 m/s), then free flight (-g) once it ends."""
    sim = make_sim(ROBOT, engine=engine)
    sim.step(300)  # settle on the feet
    v0 = sim.observe().base.linear_velocity[2]
    pushes = PushSchedule()
    pushes.request(check_push([0.0, 0.0, 4 * MASS_KG * G], 0.1))
    for _ in range(14):  # 98 steps, in blocks of 7 as a 143 Hz bridge would
        pushes.step(sim, 7)
    assert pushes.active is not None
    pushes.step(sim, 7)  # the push ends 2 steps into this block
    assert pushes.active is None and pushes.count == 1
    v1 = sim.observe().base.linear_velocity[2]
    # the 100 push steps give 3 g * 0.1 s; 5 free steps take g * 0.005 s; the feet's unloading
    # in the first ms and the base origin's offset from the centre of mass add < 1 % (seen:
    # 2.907 in both engines against 2.894)
    assert v1 - v0 == pytest.approx(3 * G * 0.1 - G * 0.005, rel=0.02)
    for _ in range(10):
        pushes.step(sim, 10)
    v2 = sim.observe().base.linear_velocity[2]
    assert v2 - v1 == pytest.approx(-G * 0.1, rel=0.02)  # in the air: gravity alone


def test_a_reset_ends_a_push_and_bad_pushes_are_refused():
    sim = make_sim(ROBOT)
    pushes = PushSchedule()
    pushes.request(check_push([0.0, 0.0, 100.0], 1.0))
    pushes.step(sim, 10)
    sim.reset(randomize=False)
    pushes.clear()
    pushes.step(sim, 300)
    assert abs(sim.observe().base.linear_velocity[2]) < 0.05  # standing, not flying
    with pytest.raises(ValueError, match='3 finite numbers'):
        check_push([0.0, float('nan'), 1.0], 0.1)
    with pytest.raises(ValueError, match=r'lasts \(0, 5\] s'):
        check_push([1.0, 0.0, 0.0], MAX_PUSH_S + 1)


@pytest.mark.parametrize('engine', ['mujoco', 'pybullet'])
def test_a_drawn_push_starts_at_exactly_its_step_with_its_impulse(engine):
    """20 N sideways for 0.1 s: +1.087 m/s, starting at the drawn step, in blocks of 7 steps.

    The feet's friction is scaled to 0.02 (the ground's friction would take most of a
    horizontal impulse: 44 % of it reached the base at friction x1, seen in both engines);
    what is left of it takes at most 0.02 g * 0.1 s = 0.02 m/s (1.8 %).
    """
    rand = Randomization('r.yaml', friction_scale=(0.02, 0.02),
                         pushes=PushRanges((0.3, 0.4), (20.0, 20.0), 0.1))
    sim = make_sim(ROBOT, engine=engine, randomization=rand)
    sim.reset(randomize=True)
    pushes = PushSchedule()
    report = pushes.draw(rand.pushes, np.random.default_rng(4), sim)
    first = pushes.next_drawn
    start = pushes.origin_step + first.start_tick
    assert report.startswith(f'random pushes every 0.3-0.4 s, 20-20 N for 0.1 s: the first at '
                             f'sim time {start * 1e-3:.3f} s')
    calls = []
    push_base = sim.push_base

    def record(force):
        calls.append((sim.step_count, list(force)))
        push_base(force)
    sim.push_base = record
    v = {}
    while sim.step_count < start + 150:
        pushes.step(sim, 7)
        v[sim.step_count] = sim.observe().base.linear_velocity.copy()
    before = max(k for k in v if k <= start)
    after = min(k for k in v if k >= start + 100)
    assert np.abs(v[before][:2]).max() < 0.01  # standing still until the drawn step
    assert pushes.drawn_count == 1 and pushes.count == 1
    # on from the step after the drawn one's state (start), off after exactly 100 steps
    assert calls == [(start, list(first.force_n)), (start + 100, [0.0, 0.0, 0.0])]
    dv = v[after][:2] - v[before][:2]
    np.testing.assert_allclose(dv, first.force_n[:2] * 0.1 / MASS_KG, rtol=0.03, atol=0.02)


def test_pushes_are_refused_for_a_fixed_base_robot():
    rand = Randomization('r.yaml', pushes=PushRanges((1.0, 2.0), (1.0, 2.0), 0.1))
    with pytest.raises(ConfigError) as err:
        make_sim(load_robot('simreal_arm'), randomization=rand)
    assert str(err.value) == ("r.yaml: pushes: expected no pushes for simreal_arm, whose base is "
                              "fixed to the world (pushes move a floating base: base.type: "
                              "floating), got 'a pushes: section'")
