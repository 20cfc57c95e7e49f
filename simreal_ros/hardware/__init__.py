"""Servo bus drivers and the virtual servo bus (Dynamixel Protocol 2.0)."""
