# simreal_ros: `make demo` and `make test` are the whole set-up on a fresh machine.
PYTHON ?= python3
# The ROS 2 distribution of the venv's PyPI wheels: kilted (.venv) or jazzy (.venv-jazzy), e.g.
# `make test ROS_DISTRO=jazzy`. Only the command line chooses: the ROS_DISTRO that a sourced
# system ROS exports describes /opt/ros, not these venvs.
ifneq ($(origin ROS_DISTRO),command line)
ROS_DISTRO := kilted
endif
DISTROS := kilted jazzy
ifeq ($(filter $(ROS_DISTRO),$(DISTROS)),)
$(error ROS_DISTRO=$(ROS_DISTRO): PyPI has ROS 2 wheels for $(DISTROS) only; on a system ROS \
install build with colcon (README.md))
endif
venv_of = $(if $(filter kilted,$(1)),.venv,.venv-$(1))
VENV ?= $(call venv_of,$(ROS_DISTRO))
BIN := $(VENV)/bin
# The mixed-distribution test (test/ros/test_mixed_distros.py) runs nodes in the other venv;
# not taken from the environment, where test-distros' own make left the other run's.
OTHER_DISTRO := $(filter-out $(ROS_DISTRO),$(DISTROS))
ifneq ($(origin SIMREAL_OTHER_VENV),command line)
SIMREAL_OTHER_VENV := $(abspath $(call venv_of,$(OTHER_DISTRO)))
endif
export SIMREAL_OTHER_VENV
STAMP := $(VENV)/.simreal-installed
OTHER_STAMP := $(SIMREAL_OTHER_VENV)/.simreal-installed
PIP_FLAGS ?= -q --disable-pip-version-check

# Network safety: DDS stays on loopback unless the caller chose otherwise.
export ROS_AUTOMATIC_DISCOVERY_RANGE ?= LOCALHOST
export ROS_DOMAIN_ID ?= $(shell echo $$(( $$$$ % 90 + 5 )))
ifeq ($(ROS_AUTOMATIC_DISCOVERY_RANGE),LOCALHOST)
unexport ROS_STATIC_PEERS  # static peers are contacted whatever the discovery range
endif
# Bytecode is cached (__pycache__/, git-ignored): pytest caches its assert-rewritten test modules
# there only when Python may write bytecode. Without the cache each of a run's three pytest
# processes (two workers, the timing part; two more on Jazzy in CI) rewrote all 290 test
# modules: collecting took 17.5 s instead of 7 s on the idle 2-core machine. So a
# PYTHONDONTWRITEBYTECODE of the caller's environment does not reach the targets' processes.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: venv venvs test-venvs venvs-at-once test test-pure test-ros test-e2e test-distros demo bench bench-quick lint clean

# tf2_msgs and nav_msgs are not on PyPI: tools/build_msgs.py generates them with the rosidl
# generators the ROS wheels bring (about 5 s per package on 2 cores).
STAMP_DEPS := setup.py setup.cfg package.xml tools/build_msgs.py \
	tools/interfaces/tf2_msgs/msg/TFMessage.msg tools/interfaces/tf2_msgs/package.xml \
	tools/interfaces/nav_msgs/msg/Odometry.msg tools/interfaces/nav_msgs/package.xml
$(STAMP): $(STAMP_DEPS)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install $(PIP_FLAGS) --upgrade pip
	$(BIN)/python -m pip install $(PIP_FLAGS) -e '.[ros-$(ROS_DISTRO),test,pybullet]'
	AMENT_PREFIX_PATH=$(abspath $(VENV)) $(BIN)/python tools/build_msgs.py
	@touch $@

venv: $(STAMP)

# The other distribution's venv, which the mixed-distribution test needs (~1 min to install).
# The sub-make gets both venvs by name: command-line variables reach it through MAKEFLAGS, and
# with VENV = SIMREAL_OTHER_VENV this rule would replace the venv's own and call itself.
ifneq ($(abspath $(STAMP)),$(abspath $(OTHER_STAMP)))
$(OTHER_STAMP): $(STAMP_DEPS)
	$(MAKE) --no-print-directory venv ROS_DISTRO=$(OTHER_DISTRO) VENV=$(SIMREAL_OTHER_VENV) \
		SIMREAL_OTHER_VENV=$(abspath $(VENV))
endif

# Test tiers (pytest markers, setup.cfg; docs/testing.md): pure (no marker, in-process), ros
# (starts real ROS 2 nodes over DDS), e2e (end to end, tens of seconds each), bench (only in
# `make bench` / `make bench-quick`). `make test` runs pure + ros + e2e.
# TESTS: paths to run instead of the whole suite (e.g. TESTS='test/nodes test/ros');
# PYTEST_ARGS: more pytest arguments (e.g. PYTEST_ARGS='-x --durations=20'). A `-m` in it
# replaces the target's selection in every pytest call: with two workers both parts would run
# the same tests, so use it with TEST_WORKERS=0.
PYTEST_ARGS ?=
# pytest-xdist workers (docs/testing.md "Two workers"). With TEST_WORKERS=2 (the default) each
# target runs two pytest calls (tools/pytest_parts.sh): the tests in two workers, less those
# marked `timing`, then the `timing` ones alone in one process (they measure delivery timing,
# rates or latency: beside the other worker the injector's zero-delay route measured a median
# of 17.6 ms against its 5 ms budget). Exit code 5 (no test selected) of one of the two calls
# is not a failure, of both it is. TEST_WORKERS=0: one pytest process, as plain pytest.
# loadfile: a module's tests run in one worker (its module-scoped fixtures are made once).
TEST_WORKERS ?= 2
PYTEST_PARTS = sh tools/pytest_parts.sh $(BIN)/python $(TEST_WORKERS)
TIER_ALL := 'not bench'
TIER_PURE := 'not ros and not e2e and not bench'
TIER_ROS := 'ros and not e2e and not bench'
TIER_E2E := 'e2e and not bench'
# The venvs the tests need, built at once: pip installs on one core (idle 2-core machine, wheels
# cached: one venv 86 s, both at once 110 s; from a fresh clone, pip upgraded first, 79 s).
test-venvs:
	@$(MAKE) --no-print-directory -j2 venvs-at-once
venvs-at-once: $(STAMP) $(OTHER_STAMP)
	@:

test: test-venvs
	$(PYTEST_PARTS) $(TIER_ALL) $(PYTEST_ARGS) $(TESTS)

test-pure: $(STAMP)
	$(PYTEST_PARTS) $(TIER_PURE) $(PYTEST_ARGS) $(TESTS)

test-ros: test-venvs
	$(PYTEST_PARTS) $(TIER_ROS) $(PYTEST_ARGS) $(TESTS)

test-e2e: $(STAMP)
	$(PYTEST_PARTS) $(TIER_E2E) $(PYTEST_ARGS) $(TESTS)

# Both venvs (kilted's and jazzy's: this distribution's and the other one), then the whole
# suite on each.
venvs: test-venvs

test-distros: venvs
	$(foreach d,$(DISTROS),$(MAKE) --no-print-directory test ROS_DISTRO=$(d) &&) true

demo: $(STAMP)
	$(BIN)/simreal demo

# Every benchmark in full (minutes each), then their quick forms as tests.
bench: $(STAMP)
	$(BIN)/simreal bench all
	$(BIN)/python -m pytest -q -m bench

# Every benchmark of bench/ in its quick form, one test each (test/**/test_bench*.py): they
# measure and check their figures are there, they assert no time. CI runs this. In two parts
# as the test targets: the workers, then the `timing` ones alone (the bus benchmarks, whose
# SDK-default case failed beside another benchmark, and the recorder's lossless rounds). A
# figure measured beside another benchmark is noisier, and none is asserted; in one process
# they took 202 s on the idle 2-core machine, 81 % of it CPU, all in two workers 114 s.
bench-quick: $(STAMP)
	$(PYTEST_PARTS) bench $(TESTS)

lint: $(STAMP)
	$(BIN)/ruff check simreal_ros test bench launch tools setup.py
	$(BIN)/mypy simreal_ros

clean:
	rm -rf $(foreach d,$(DISTROS),$(call venv_of,$(d))) build install log *.egg-info
