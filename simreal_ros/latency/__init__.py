"""The latency injector's model: profiles, routes, delay distributions (no ROS)."""
