"""PyBullet behind :class:`simreal_ros.sim.backend.SimBackend`: model building and physics."""
