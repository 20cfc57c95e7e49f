# simreal_ros: `make demo` and `make test` are the whole set-up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.simreal-installed
PIP_FLAGS ?= -q --disable-pip-version-check

# Network safety: DDS stays on loopback unless the caller chose otherwise.
export ROS_AUTOMATIC_DISCOVERY_RANGE ?= LOCALHOST
export ROS_DOMAIN_ID ?= $(shell echo $$(( $$$$ % 90 + 5 )))
ifeq ($(ROS_AUTOMATIC_DISCOVERY_RANGE),LOCALHOST)
unexport ROS_STATIC_PEERS  # static peers are contacted whatever the discovery range
endif
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: venv test demo bench lint clean

$(STAMP): setup.py setup.cfg package.xml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install $(PIP_FLAGS) --upgrade pip
	$(BIN)/python -m pip install $(PIP_FLAGS) -e '.[ros,test,pybullet]'
	@touch $@

venv: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q

demo: $(STAMP)
	$(BIN)/simreal demo

bench: $(STAMP)
	$(BIN)/simreal bench all
	$(BIN)/python -m pytest -q -m bench

lint: $(STAMP)
	$(BIN)/ruff check simreal_ros test bench launch setup.py
	$(BIN)/mypy simreal_ros/core

clean:
	rm -rf $(VENV) build install log *.egg-info
