"""Shared ROS 2 glue: message conversions, QoS profiles, node runtime."""
