# mk/fuzz.mk — libFuzzer targets for what reads hostile bytes (tests/fuzz/).
#
#   make fuzz [FUZZ_S=60] [FUZZ=codec]   fuzz each target (or one) for FUZZ_S s,
#                                        new inputs kept in build/fuzz/corpus/NAME
#   make fuzz-build                      build them (clang, ASan + UBSan)
#   make fuzz-corpus                     run every seed in tests/fuzz/corpus once
#
# make test runs fuzz-corpus through tests/scenario/fuzz/t_fuzz_corpus.sh
# (skipped where clang is missing). Each target is built from the sources
# it tests, instrumented, not from build/lib*.a. A crash leaves its input
# as build/fuzz/crash-* (libFuzzer's -artifact_prefix); add it to the
# corpus once fixed. docs/RELIABILITY.md keeps the runs.

FUZZ_CC    ?= clang
FUZZ_S     ?= 60
FUZZ       ?= codec store safetensors record
FUZZ_DIR   := $(BUILD)/fuzz
FUZZ_FLAGS := -g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
              -fno-sanitize-recover=undefined -fno-omit-frame-pointer -I$(BUILD)/inc/tests -Itests/fuzz
FUZZ_BASE  := $(wildcard transport/base/*.c) $(wildcard transport/wire/*.c)
FUZZ_LIBS  := $(shell pkg-config --libs msgpack 2>/dev/null || echo -lmsgpackc) -lm

FUZZ_SRC_codec       := $(FUZZ_BASE)
FUZZ_SRC_store       := $(FUZZ_BASE)
FUZZ_SRC_safetensors := $(FUZZ_BASE) workers/ckpt/safetensors.c workers/ckpt/st_json.c
FUZZ_SRC_record      := $(FUZZ_BASE) tui/record/record.c
FUZZ_NAMES := codec store safetensors record
FUZZ_BINS  := $(FUZZ_NAMES:%=$(FUZZ_DIR)/fuzz_%)

define FUZZ_RULE
$(FUZZ_DIR)/fuzz_$(1): tests/fuzz/fuzz_$(1).c tests/fuzz/fuzz_common.h $(FUZZ_SRC_$(1)) | $(BUILD)/inc/tests/.ok
	@mkdir -p $$(dir $$@)
	@$$(if $$(Q),echo "  FUZZ  $$@")
	$$(Q)$$(FUZZ_CC) $$(FUZZ_FLAGS) -o $$@ tests/fuzz/fuzz_$(1).c $(FUZZ_SRC_$(1)) $$(FUZZ_LIBS)
endef
$(foreach n,$(FUZZ_NAMES),$(eval $(call FUZZ_RULE,$(n))))
# fuzz_codec also compares against the decoder it replaced
$(FUZZ_DIR)/fuzz_codec: tests/ref/codec_ref.h

.PHONY: fuzz fuzz-build fuzz-corpus
fuzz-build: $(FUZZ_BINS)

# The seed corpus stays as it is; what the fuzzer finds goes to build/.
fuzz: fuzz-build
	$(Q)for n in $(FUZZ); do \
	  mkdir -p $(FUZZ_DIR)/corpus/$$n; \
	  echo "fuzz $$n: $(FUZZ_S) s"; \
	  $(FUZZ_DIR)/fuzz_$$n -max_total_time=$(FUZZ_S) -print_final_stats=1 -rss_limit_mb=2048 \
	    -artifact_prefix=$(FUZZ_DIR)/crash-$$n- $(FUZZ_DIR)/corpus/$$n tests/fuzz/corpus/$$n \
	    2>$(FUZZ_DIR)/$$n.log || { tail -40 $(FUZZ_DIR)/$$n.log; exit 1; }; \
	  grep -E '^stat::number_of_executed_units|^stat::new_units_added' $(FUZZ_DIR)/$$n.log; \
	done

# Every seed once under the sanitizers (fast: a second or two in all).
fuzz-corpus: fuzz-build
	$(Q)for n in $(FUZZ_NAMES); do \
	  $(FUZZ_DIR)/fuzz_$$n tests/fuzz/corpus/$$n/* >$(FUZZ_DIR)/$$n.corpus.log 2>&1 || \
	    { echo "fuzz-corpus $$n: FAILED"; tail -30 $(FUZZ_DIR)/$$n.corpus.log; exit 1; }; \
	  echo "fuzz-corpus $$n: $$(ls tests/fuzz/corpus/$$n | wc -l) inputs ok"; \
	done
