"""Teleoperation from a leader arm: joint mapping, safety, demonstration quality (no ROS)."""
