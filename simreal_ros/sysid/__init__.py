"""System identification from bags: see :mod:`simreal_ros.sysid.api` and docs/sysid.md."""
