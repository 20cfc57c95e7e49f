"""The simulation (no ROS): the engine protocol, its engines, scenes, goals."""
