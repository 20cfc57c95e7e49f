"""Sim-vs-real gap metrics, recorded episodes as arrays, data-quality checks (numpy only)."""
