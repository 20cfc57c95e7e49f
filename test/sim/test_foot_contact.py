"""A foot's touchdown is absorbed alike in MuJoCo and PyBullet (sim/bullet/floating.py).

MuJoCo's contact is soft: its reference acceleration along the normal is ``-b v - k r`` with
the damping rate ``b = 2 / (dmax timeconst)`` = 2 / (0.95 x 0.02 s) = 105 1/s, so a foot that
lands is stopped over about ``1 / b`` = 9.5 ms. Bullet's contact is rigid (it cancels the
normal velocity within one 1 ms step: 576 N on the feet where MuJoCo has 107 N, dropped 2 cm),
unless a foot has a spring-damper contact, which the PyBullet engine gives each foot: damping
``c = m b`` with ``m`` the mass a foot carries in a trot (half the robot's, two feet down).

The test lands simreal_quad on two diagonal feet (fl, rr; the other two folded up), as in a
trot: each foot then carries half the mass, the case the damper is sized for, and the base's
downward velocity decays at ``2 c / M = b``: its 1/e time is ``1 / b`` = 9.5 ms in both
engines up to the springs (MuJoCo's ``k``, Bullet's at damping ratio 0.7) and the legs'
servo compliance, which a factor of 2 either way bounds. A rigid contact stops it in 1-2 ms.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from simreal_ros.core.commands import JointTarget
from simreal_ros.core.robot import load_robot
from simreal_ros.sim.bullet.floating import MUJOCO_DMAX, MUJOCO_TIMECONST_S
from simreal_ros.sim.engines import make_sim

ROBOT = load_robot('simreal_quad')
DROP_M = 0.02
B_PER_S = 2.0 / (MUJOCO_DMAX * MUJOCO_TIMECONST_S)   # MuJoCo's contact damping rate


def _lift(sim, height_m: float) -> None:
    """Raise the base by ``height_m``, at rest (engine-specific: there is no public setter)."""
    if sim.engine == 'mujoco':
        sim.data.qpos[sim.built.base_qpos_adr + 2] += height_m
        mujoco.mj_forward(sim.model, sim.data)
    else:
        fb = sim.world.floating
        st = fb.state()
        fb.set_pose(st.position + np.array([0.0, 0.0, height_m]), st.orientation_wxyz)


def touchdown(engine: str) -> tuple[float, float]:
    """Land on fl and rr from DROP_M: the base's speed at touchdown, and its 1/e time (s)."""
    sim = make_sim(ROBOT, engine=engine)
    q = ROBOT.home.copy()
    q[[4, 7]] -= 0.6     # fr and rl hips forward, knees folded: those feet 6 cm up
    q[[5, 8]] -= 1.0
    sim.set_target(JointTarget.hold(q))
    sim.set_joint_state(q, np.zeros(ROBOT.n))
    _lift(sim, DROP_M)
    v = []
    landed = None
    for k in range(200):
        sim.step(1)
        o = sim.observe()
        v.append(float(o.base.linear_velocity[2]))
        if landed is None and o.foot_force[[0, 3]].sum() > 0.5:
            assert o.foot_force[[1, 2]].sum() == 0.0  # only the diagonal pair lands
            landed = k
    assert landed is not None
    v0 = v[landed - 1]
    after = np.asarray(v[landed:])
    return v0, float(np.argmax(after > v0 / math.e)) * ROBOT.timestep_s


@pytest.mark.parametrize('engine', ['mujoco', 'pybullet'])
def test_a_trot_touchdown_is_stopped_at_mujocos_contact_damping_rate(engine):
    v0, t_e = touchdown(engine)
    assert v0 == pytest.approx(-math.sqrt(2 * 9.81 * DROP_M), rel=0.05)   # free fall
    assert 0.5 / B_PER_S <= t_e <= 2.0 / B_PER_S, f'1/e time {t_e * 1e3:.0f} ms'
