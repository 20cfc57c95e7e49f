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
#: /robot_description and /tf_static: latched (transient local, depth 1), as
#: robot_state_publisher and tf2's static broadcaster offer them.
LATCHED = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                     reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
#: /tf: tf2's dynamic broadcaster profile (reliable, volatile, depth 100).
TF = QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST,
                reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
#: camera frames a consumer acts on (the policy node): best effort, newest only. It matches a
#: reliable publisher (the stack's cameras) and a best-effort one (sensor-data drivers); a
#: retransmitted frame would be older than the next one, and an old frame is worth nothing.
IMAGE_INPUT = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                         reliability=ReliabilityPolicy.BEST_EFFORT,
                         durability=DurabilityPolicy.VOLATILE)
