"""Servo buses: the real Dynamixel side (``dynamixel/``) and the virtual bus (``emulator/``)."""
