"""The launch planner (mode + config -> node specs) and the built-in launcher."""
