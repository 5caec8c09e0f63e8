# mk/frameworks.mk — Lightning and Accelerate under ddptop (issue 29; CI does not run it).
#
#   make test-frameworks FRAMEWORKS_PY=/path/to/python
#                       tests/frameworks.sh: a Lightning Trainer(strategy="ddp") script and
#                       an Accelerate script, each bare and under `ddptop run -n 2`, then a
#                       table of pass/fail. FRAMEWORKS_PY: a python with torch 2.x, lightning
#                       and accelerate (python3 -m venv V && V/bin/pip install torch lightning
#                       accelerate); without one it says so in one line and exits 2.

.PHONY: test-frameworks
FRAMEWORKS_PY ?=

test-frameworks:
	$(Q)FRAMEWORKS_PY="$(FRAMEWORKS_PY)" bash tests/frameworks.sh check
	$(Q)$(MAKE) --no-print-directory -j$(BUILD_JOBS) bins
	$(Q)BUILD=$(BUILD) FRAMEWORKS_PY="$(FRAMEWORKS_PY)" bash tests/frameworks.sh
