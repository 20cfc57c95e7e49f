"""``simreal sweep``: grids of evaluations on local worker processes or on Ray.

ROS-free: a cell runs the policy in-process (:mod:`simreal_ros.sweep.evaluate`), never a node.
:mod:`config` reads and checks a sweep file and expands it into cells, :mod:`evaluate` runs one
cell, :mod:`runner` runs the cells on a process pool or Ray with retries and resume, and
:mod:`outputs` writes the table (CSV, Parquet) and the HTML page. See docs/sweeps.md.
"""
