"""QoS profiles of the topic contract."""

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

#: joint_states, joint_commands, imu/data: reliable, shallow (what ros2_control uses).
STATE = QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST,
                   reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
COMMAND = STATE
#: /clock: reliable publisher, compatible with rclpy's best-effort clock subscription.
CLOCK = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                   reliability=ReliabilityPolicy.RELIABLE)
#: /diagnostics, as diagnostic_updater publishes it.
DIAGNOSTICS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
