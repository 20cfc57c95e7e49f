"""Whole jobs built on launches: the sysid flywheel, policy evaluation and the demo."""
