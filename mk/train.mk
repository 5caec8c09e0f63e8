# mk/train.mk — training checks against real PyTorch.
#
#   make bench-train   ddptop vs PyTorch DDP, side by side (make bench runs it)
#   make check-torch   buckets, optimizer bits, 50-step weights vs PyTorch DDP
#   make bench-precision  the CPU trainer's steps/s in --precision fp32, bf16, tf32,
#                      side by side (make bench runs it)
#   make bench-torch   the lesson script (examples/ddp_basics.py) under ddptop with
#                      the torch adapter vs launched as torchrun does, side by side
#                      (make bench runs it)
#
# All three need Debian's python3-torch (1.13, CPU), which `make deps` installs
# (without its recommends). BENCH_ARGS / CHECK_TORCH_ARGS / BENCH_TORCH_ARGS pass
# options through, e.g. make bench-train BENCH_ARGS="--reps 5 --steps 600".

.PHONY: bench-train check-torch bench-torch torch-deps bench-precision
bench: bench-train bench-torch bench-precision

BENCH_ARGS ?=
CHECK_TORCH_ARGS ?=
BENCH_TORCH_ARGS ?=
BENCH_PREC_ARGS ?=

torch-deps: deps

bench-train: torch-deps
	$(Q)$(MAKE) --no-print-directory BUILD=$(BUILD) all pydeps
	$(Q)$(PY) bench/bench_train.py --ddptop $(BUILD)/ddptop --py $(PY) --json $(BUILD)/bench-train.json $(BENCH_ARGS)

check-torch: torch-deps
	$(Q)$(MAKE) --no-print-directory BUILD=$(BUILD) all pydeps
	$(Q)$(PY) bench/check_torch.py --ddptop $(BUILD)/ddptop --py $(PY) $(CHECK_TORCH_ARGS)

bench-torch: torch-deps
	$(Q)$(MAKE) --no-print-directory BUILD=$(BUILD) all pydeps
	$(Q)$(PY) bench/bench_torch.py --ddptop $(BUILD)/ddptop --py $(PY) --json $(BUILD)/bench-torch.json $(BENCH_TORCH_ARGS)

bench-precision: all
	$(Q)$(PY) bench/bench_precision.py --ddptop $(BUILD)/ddptop $(BENCH_PREC_ARGS)
