"""The shared kernel: what two or more layers read, pure Python and numpy only.

Never imports rclpy, mujoco, pybullet, torch or cv2 (``test/test_layering.py`` enforces it), so
every module here is testable anywhere and cheap to import for the launch planner. A module
belongs here only when several layers (sim, hardware, policy, sysid, nodes, bringup, cli) share
it; logic of one domain lives in that domain's package (``bag``, ``gap``, ``latency``,
``teleop``, ``sim``, ``hardware``, ``policy``, ``sysid``, ``sweep``, ``report``, ``jobs``).

The robot and its models
    ``robot`` (the robot spec every node reads), ``model_files`` (URDF or MJCF, and the files
    they name), ``robot_check`` (a spec against its model, one line per problem),
    ``calibration`` (joint calibration, LeRobot's files both ways), ``legged`` (what a
    floating base measures and is told: IMU, odometry, contacts, ``cmd_vel``).
Physics parameters
    ``dynamics`` (overlays and domain randomization), ``pushes`` (random pushes on a floating
    base: one seeded draw for the bridge, training and the evals), ``residual_model`` (learned
    residual dynamics: file format and per-step inference).
Commands and excitation
    ``commands`` (joint commands checked against the spec), ``excitation`` (seeded
    identification trajectories), ``excite_config`` (the excitation node's settings).
Cameras and transforms
    ``camera_info`` (camera data, calibration files, driver settings), ``optics`` (the lens and
    sensor arithmetic the virtual camera and visual training share), ``tf_tree`` and
    ``tf_config`` (the transform tree and the state publisher's settings).
Time, scheduling and processes
    ``timing`` (periodic waits and period statistics, integer ns), ``realtime`` (SCHED_FIFO,
    affinity, locked memory), ``netenv`` (the loopback-first environment of every ROS process).
Files
    ``paths`` (the package's data files), ``validate`` (typed YAML accessors whose errors name
    the file, the key, what was expected and what was found).
"""
