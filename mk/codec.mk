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
