# mk/train.mk — training checks against real PyTorch (issue 3).
#
#   make bench-train   ddptop vs PyTorch DDP, side by side (make bench runs it)
#   make check-torch   buckets, optimizer bits, 50-step weights vs PyTorch DDP
#
# Both need Debian's python3-torch (1.13, CPU); they install it with apt-get
# when it is missing (as root; otherwise they print the command). make test
# never needs torch. BENCH_ARGS / CHECK_TORCH_ARGS pass options through,
# e.g. make bench-train BENCH_ARGS="--reps 5 --steps 600".

.PHONY: bench-train check-torch torch-deps
bench: bench-train

BENCH_ARGS ?=
CHECK_TORCH_ARGS ?=

torch-deps:
	$(Q)if ! $(PY_SYS) -c 'import torch' 2>/dev/null; then \
	  if [ "$$(id -u)" != 0 ]; then echo "torch-deps: python3-torch is missing; run: sudo apt-get install -y python3-torch"; exit 1; fi; \
	  echo "torch-deps: installing python3-torch (Debian, CPU)"; export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -q python3-torch >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q python3-torch >/dev/null; } \
	    || { echo "torch-deps: apt-get install python3-torch failed"; exit 1; }; \
	fi

bench-train: torch-deps
	$(Q)$(MAKE) --no-print-directory BUILD=$(BUILD) all pydeps
	$(Q)$(PY) bench/bench_train.py --ddptop $(BUILD)/ddptop --py $(PY) --json $(BUILD)/bench-train.json $(BENCH_ARGS)

check-torch: torch-deps
	$(Q)$(MAKE) --no-print-directory BUILD=$(BUILD) all pydeps
	$(Q)$(PY) bench/check_torch.py --ddptop $(BUILD)/ddptop --py $(PY) $(CHECK_TORCH_ARGS)
