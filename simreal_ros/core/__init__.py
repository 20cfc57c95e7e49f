"""ROS-free core: configs, specs, overlays, commands, excitation, timing. Never imports rclpy."""
