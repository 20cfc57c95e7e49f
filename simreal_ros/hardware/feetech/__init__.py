"""The real Feetech STS side: the STS packet format, the STS3215 memory table, the bus driver.

Nothing here imports :mod:`simreal_ros.hardware.emulator`: the driver talks to whatever is on
the port, a USB adapter or the virtual STS bus, through the vendor's ``scservo_sdk`` alone.
"""
