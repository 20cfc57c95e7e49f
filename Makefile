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
ifneq ($(origin SIMREAL_OTHER_VENV),command line)
SIMREAL_OTHER_VENV := $(abspath $(call venv_of,$(filter-out $(ROS_DISTRO),$(DISTROS))))
endif
export SIMREAL_OTHER_VENV
STAMP := $(VENV)/.simreal-installed
PIP_FLAGS ?= -q --disable-pip-version-check

# Network safety: DDS stays on loopback unless the caller chose otherwise.
export ROS_AUTOMATIC_DISCOVERY_RANGE ?= LOCALHOST
export ROS_DOMAIN_ID ?= $(shell echo $$(( $$$$ % 90 + 5 )))
ifeq ($(ROS_AUTOMATIC_DISCOVERY_RANGE),LOCALHOST)
unexport ROS_STATIC_PEERS  # static peers are contacted whatever the discovery range
endif
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: venv venvs test test-distros demo bench lint clean

# tf2_msgs is not on PyPI: tools/build_tf2_msgs.py generates it with the rosidl generators the
# ROS wheels bring (about 5 s on 2 cores).
$(STAMP): setup.py setup.cfg package.xml tools/build_tf2_msgs.py tools/interfaces/tf2_msgs/msg/TFMessage.msg
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install $(PIP_FLAGS) --upgrade pip
	$(BIN)/python -m pip install $(PIP_FLAGS) -e '.[ros-$(ROS_DISTRO),test,pybullet]'
	AMENT_PREFIX_PATH=$(abspath $(VENV)) $(BIN)/python tools/build_tf2_msgs.py
	@touch $@

venv: $(STAMP)

# TESTS: paths to run instead of the whole suite (e.g. TESTS='test/nodes test/ros')
test: $(STAMP)
	$(BIN)/python -m pytest -q $(TESTS)

# Both venvs, then the whole suite on each (what .ci/run does).
venvs:
	$(foreach d,$(DISTROS),$(MAKE) --no-print-directory venv ROS_DISTRO=$(d) &&) true

test-distros: venvs
	$(foreach d,$(DISTROS),$(MAKE) --no-print-directory test ROS_DISTRO=$(d) &&) true

demo: $(STAMP)
	$(BIN)/simreal demo

bench: $(STAMP)
	$(BIN)/simreal bench all
	$(BIN)/python -m pytest -q -m bench

lint: $(STAMP)
	$(BIN)/ruff check simreal_ros test bench launch tools setup.py
	$(BIN)/mypy simreal_ros

clean:
	rm -rf $(foreach d,$(DISTROS),$(call venv_of,$(d))) build install log *.egg-info
