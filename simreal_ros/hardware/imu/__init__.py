"""IMU devices on a serial port: the WitMotion WT901 protocol and its reader (ROS-free)."""
