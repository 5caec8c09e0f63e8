# mk/codec.mk — the frontend's decode cost per message: `make bench-codec`
# (also run by `make bench`, a few seconds). tests/tools/bench_codec.c
# decodes a rank's step, coll and beat frames and a 50 ms burst of them with
# codec_decode and with the decoder it replaced (tests/ref/codec_ref.h),
# taking turns, and prints ns per message and the ratios (docs/BENCHMARKS.md).
# Override: BENCH_CODEC_ARGS (-n frames a case and rep, -r reps).
BENCH_CODEC_ARGS ?= -n 200000 -r 5

.PHONY: bench-codec
bench: bench-codec
bench-codec: $(BUILD)/tests/bench_codec
	$(Q)$(BUILD)/tests/bench_codec $(BENCH_CODEC_ARGS)

# `make bench-model` (also run by `make bench`, a minute and a half): the
# work after decoding, per message (the sender check, the viewers'
# snapshot, the job model), as instructions counted by callgrind on
# tests/tools/bench_model.c's stream of 64, 256 and 1024 ranks
# (tests/bench_model.sh; docs/BENCHMARKS.md); another build's column:
# BUILD=its build directory bash tests/bench_model.sh. Override:
# BENCH_MODEL_ROWS.
BENCH_MODEL_ROWS ?= 64 256 1024

.PHONY: bench-model
bench: bench-model
bench-model: $(BUILD)/tests/bench_model
	$(Q)BUILD=$(BUILD) ROWS="$(BENCH_MODEL_ROWS)" bash tests/bench_model.sh
