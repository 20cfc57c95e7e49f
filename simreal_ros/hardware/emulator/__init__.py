"""The virtual servo bus: a MuJoCo arm with a hidden reality that answers on a pseudo-terminal.

It speaks the wire protocol of :mod:`simreal_ros.hardware.dynamixel` (whose packets and control
table it uses), so the real driver cannot tell it from a USB adapter with servos on it.
"""
