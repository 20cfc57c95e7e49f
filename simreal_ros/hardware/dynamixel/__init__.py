"""The real Dynamixel side: Protocol 2.0 packets, the XM430 control table, the bus driver.

Nothing here imports :mod:`simreal_ros.hardware.emulator`: the driver talks to whatever is on
the port, a USB adapter or the virtual servo bus, through ``dynamixel_sdk`` alone.
"""
