"""Choose a physics engine by name: :func:`make_sim` is how every caller gets a simulation.

``ENGINES`` lists the engines (:data:`simreal_ros.sim.bridge_config.ENGINES`); the first is
the default. An engine module is imported only when it is asked for, so an install without an
engine's package (PyBullet is the ``.[pybullet]`` extra) still runs the others, and asking for
the missing one is one clear error.
"""

from __future__ import annotations

from simreal_ros.core.dynamics import Overlay, Randomization
from simreal_ros.core.robot import RobotSpec
from simreal_ros.errors import ModelError
from simreal_ros.sim.backend import SimBackend
from simreal_ros.sim.bridge_config import ENGINES, check_floating_base
from simreal_ros.sim.scene import Scene

__all__ = ['DEFAULT_ENGINE', 'ENGINES', 'make_sim']

DEFAULT_ENGINE = ENGINES[0]


def make_sim(robot: RobotSpec, scene: Scene | None = None, overlay: Overlay | None = None,
             randomization: Randomization | None = None, seed: int = 0,
             engine: str = DEFAULT_ENGINE) -> SimBackend:
    """Build ``robot`` (with ``scene``) in ``engine`` with the overlay's dynamics applied.

    A floating-base robot on an engine that has none is one ConfigError.
    """
    check_floating_base(robot, engine)
    if engine == 'mujoco':
        from simreal_ros.sim.mujoco.physics import MujocoSim
        return MujocoSim(robot, scene, overlay, randomization, seed)
    if engine == 'pybullet':
        try:
            from simreal_ros.sim.bullet.physics import BulletSim
        except ImportError as exc:
            raise ModelError(f'physics engine pybullet: the pybullet package is missing '
                             f"({exc}); install it with pip install 'simreal_ros[pybullet]'"
                             ) from None
        return BulletSim(robot, scene, overlay, randomization, seed)
    raise ModelError(f'physics engine {engine!r}: expected one of {", ".join(ENGINES)}')
