# mk/tui.mk — the TUI's load benchmark: `make bench-tui` (also run by
# `make bench`). 64 scripted ranks x 100 steps/s against the real frontend
# in tmux; prints CPU, frames, step-to-screen latency and drops, and the
# verdict against the targets (tests/bench_tui.sh; docs/BENCHMARKS.md).
# Override: BENCH_TUI_RANKS, BENCH_TUI_RATE (steps/s per rank),
# BENCH_TUI_BUCKETS (all-reduces per step), BENCH_TUI_SECS.
BENCH_TUI_RANKS   ?= 64
BENCH_TUI_RATE    ?= 100
BENCH_TUI_BUCKETS ?= 1
BENCH_TUI_SECS    ?= 20

.PHONY: bench-tui
bench: bench-tui
bench-tui: $(BUILD)/ddptop $(BUILD)/tests/tool_feed
	$(Q)BUILD=$(BUILD) RANKS=$(BENCH_TUI_RANKS) RATE=$(BENCH_TUI_RATE) BUCKETS=$(BENCH_TUI_BUCKETS) SECS=$(BENCH_TUI_SECS) \
	  bash tests/bench_tui.sh
