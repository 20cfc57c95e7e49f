"""MuJoCo model building and the physics side of the sim bridge (no ROS)."""
