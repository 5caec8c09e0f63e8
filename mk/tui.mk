# mk/tui.mk — the TUI's load benchmark: `make bench-tui` (also run by
# `make bench`). 64 scripted ranks x 100 steps/s against the real frontend
# in tmux; prints CPU, frames, step-to-screen latency and drops, and the
# verdict against the targets (tests/bench_tui.sh; docs/BENCHMARKS.md);
# then 64, 256 and 1024 simulated ranks (tests/bench_tui_load.sh).
# Override: BENCH_TUI_RANKS, BENCH_TUI_RATE (steps/s per rank),
# BENCH_TUI_BUCKETS (all-reduces per step), BENCH_TUI_SECS.
BENCH_TUI_RANKS   ?= 64
BENCH_TUI_RATE    ?= 100
BENCH_TUI_BUCKETS ?= 1
BENCH_TUI_SECS    ?= 20
# then rows at scale from tests/tools/tool_load.c (a few processes, not one
# per rank), the single-frame wire, bursts with the ranks' flushes spread
# over 50 ms and bursts on the wall clock's 50 ms marks (the worker's) side
# by side (tests/bench_tui_load.sh; BENCH_TUI_WIRES); BENCH_TUI_BEFORE=PATH adds another ddptop's rows,
# fed the wires in BENCH_TUI_BEFORE_WIRES (single: a build without bursts)
BENCH_TUI_ROWS    ?= 64 256 1024
BENCH_TUI_BEFORE  ?=
BENCH_TUI_BEFORE_WIRES ?= single
BENCH_TUI_WIRES   ?= single burst+spread burst

.PHONY: bench-tui
bench: bench-tui
bench-tui: $(BUILD)/ddptop $(BUILD)/tests/tool_feed $(BUILD)/tests/tool_load
	$(Q)BUILD=$(BUILD) RANKS=$(BENCH_TUI_RANKS) RATE=$(BENCH_TUI_RATE) BUCKETS=$(BENCH_TUI_BUCKETS) SECS=$(BENCH_TUI_SECS) \
	  bash tests/bench_tui.sh
	$(Q)BUILD=$(BUILD) ROWS="$(BENCH_TUI_ROWS)" RATE=$(BENCH_TUI_RATE) BUCKETS=$(BENCH_TUI_BUCKETS) SECS=$(BENCH_TUI_SECS) \
	  WIRES="$(BENCH_TUI_WIRES)" BEFORE=$(BENCH_TUI_BEFORE) BEFORE_WIRES="$(BENCH_TUI_BEFORE_WIRES)" bash tests/bench_tui_load.sh

# `make bench-frame` (also run by `make bench`, ~30 s): what one frame of the
# screen costs in instructions (callgrind: the same count every run), at 64,
# 256 and 1024 ranks, the canvas apart from the terminal's share, and the
# bytes the terminal got with their hash (tests/bench_frame.sh,
# tests/tools/bench_frame.c; docs/BENCHMARKS.md). BENCH_FRAME_BIN=PATH: another
# build's bench_frame (e.g. main's) for the before column.
BENCH_FRAME_RANKS  ?= 64 256 1024
BENCH_FRAME_FRAMES ?= 50
BENCH_FRAME_BIN    ?= $(BUILD)/tests/bench_frame

.PHONY: bench-frame
bench: bench-frame
bench-frame: $(BUILD)/tests/bench_frame
	$(Q)BUILD=$(BUILD) RANKS="$(BENCH_FRAME_RANKS)" FRAMES=$(BENCH_FRAME_FRAMES) BIN=$(BENCH_FRAME_BIN) bash tests/bench_frame.sh
