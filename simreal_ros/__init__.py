"""simreal_ros: one ROS 2 stack for MuJoCo simulation and real robots over identical topics."""

__version__ = '0.1.0'
