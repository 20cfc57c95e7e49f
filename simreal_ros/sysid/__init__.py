"""System identification from bags: see :mod:`simreal_ros.sysid.api` and docs/sysid.md."""

#: The parameters ``simreal sysid --fit`` can identify. Here, not in :mod:`.fit`, so that the
#: ``simreal`` command's parser lists them without importing mujoco.sysid and scipy (0.57 s of
#: ``python -X importtime -m simreal_ros --help``, every command paid it).
FIT_NAMES = ('damping', 'frictionloss', 'armature', 'command_delay', 'kp', 'mass', 'backlash')
#: What ``simreal sysid`` fits without ``--fit`` (and a sweep's sysid cell without ``fit``).
DEFAULT_FIT = 'damping,frictionloss,armature,command_delay'
