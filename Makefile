# ddptop — one GNU Makefile. `make run`, `make test`; V=1 for full commands.
# Overridable: CC, CXX, CUDA_HOME, NO_CUDA=1, PY (python with msgpack/numpy).

CC       ?= gcc
CXX      ?= g++
CUDA_HOME ?= /usr/local/cuda
BUILD    := build
PY_SYS   := /usr/bin/python3
PYENV    := $(BUILD)/pyenv
PY       := $(PYENV)/bin/python

CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -D_GNU_SOURCE -Wall -Wextra -MMD -MP -Itransport -Iworkers -Itui
CXXFLAGS ?= -O2 -g
CXXFLAGS += -std=c++17 -Wall -Wextra -MMD -MP -Itransport -Iworkers
LDLIBS_Z := $(shell pkg-config --libs libzmq msgpack 2>/dev/null || echo -lzmq -lmsgpackc)
LDLIBS_W := -lopenblas -lz -lgloo -lstdc++ -lpthread -lm
LDLIBS_T := -lncursesw -ltinfo -lpthread -lm

ifeq ($(V),1)
Q :=
else
Q := @
endif

# Debian packages the project needs (make deps installs the missing ones).
DEB_PKGS := build-essential pkg-config libncurses-dev libzmq3-dev libmsgpack-dev libgloo-dev \
            libopenblas-dev zlib1g-dev tmux dataset-fashion-mnist python3 python3-venv \
            python3-pip python3-msgpack python3-zmq python3-numpy procps iproute2 util-linux

# --- CUDA / NCCL detection (the CUDA backend itself arrives with the GPU issue) ---
ifeq ($(NO_CUDA),1)
HAVE_NVCC :=
else
HAVE_NVCC := $(wildcard $(CUDA_HOME)/bin/nvcc)
HAVE_NCCL := $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h)
endif

TRANSPORT_SRC := $(wildcard transport/*.c)
WORKER_SRC    := $(filter-out workers/main.c,$(wildcard workers/*.c))
WORKER_CXX    := $(wildcard workers/*.cc)
TUI_SRC       := $(filter-out tui/main.c,$(wildcard tui/*.c))

# Feature fragments (mk/*.mk: bench, CUDA, ...) come before the rules so they
# can add objects (WORKER_EXTRA_OBJ), libraries (LDLIBS_W) and targets.
WORKER_EXTRA_OBJ :=
-include $(sort $(wildcard mk/*.mk))

TRANSPORT_OBJ := $(TRANSPORT_SRC:%.c=$(BUILD)/%.o)
WORKER_OBJ    := $(WORKER_SRC:%.c=$(BUILD)/%.o) $(WORKER_CXX:%.cc=$(BUILD)/%.o) $(WORKER_EXTRA_OBJ)
TUI_OBJ       := $(TUI_SRC:%.c=$(BUILD)/%.o)

# tui/ uses the sampler for `ddptop sampler` (pure code, no training).
TUI_EXTRA_OBJ := $(BUILD)/workers/sampler.o $(BUILD)/workers/fault.o

TEST_SRC  := $(wildcard tests/test_*.c)
TEST_BIN  := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TOOL_SRC  := $(wildcard tests/tool_*.c)
TOOL_BIN  := $(TOOL_SRC:tests/%.c=$(BUILD)/tests/%) $(BUILD)/tests/bench_comm

BINS := $(BUILD)/ddptop $(BUILD)/ddptop-worker

.PHONY: all deps pydeps run test bench clean info check-deps
# Keep test objects: they are intermediate in a pattern chain.
.SECONDARY:
.DEFAULT_GOAL := all

all: info $(BINS) $(TEST_BIN) $(TOOL_BIN)

info:
	@printf 'ddptop build: '; \
	 if [ -n "$(HAVE_NVCC)" ]; then printf '✓ nvcc (%s) ' "$(CUDA_HOME)"; else printf '✗ nvcc '; fi; \
	 if [ -n "$(HAVE_NCCL)" ]; then printf '✓ nccl '; else printf '✗ nccl '; fi; \
	 if [ -f /usr/lib/libgloo.so ]; then printf '✓ gloo '; else printf '✗ gloo '; fi; \
	 if [ -n "$(HAVE_NVCC)" ]; then printf '(CUDA backend built: --device cuda%s)\n' "$(if $(HAVE_NCCL), --backend nccl|gloo, --backend gloo)"; else printf '(CPU build: no CUDA backend)\n'; fi

# Install missing Debian packages; without root print the apt-get line.
deps:
	$(Q)missing=$$(for p in $(DEB_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -z "$$missing" ]; then echo "deps: all Debian packages present"; exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "deps: missing packages; run: sudo apt-get update && sudo apt-get install -y $$missing"; exit 1; fi; \
	echo "deps: installing$$(echo ' '$$missing)"; \
	export DEBIAN_FRONTEND=noninteractive; apt-get update -q >/dev/null && apt-get install -y -q $$missing >/dev/null || { echo "deps: apt-get failed"; exit 1; }

# Python with a real safetensors reader for the tests (PyPI), over Debian's
# msgpack/zmq/numpy.
pydeps: $(PYENV)/.ok
$(PYENV)/.ok:
	$(Q)$(PY_SYS) -m venv --system-site-packages $(PYENV) && \
	 $(PYENV)/bin/pip install -q --disable-pip-version-check safetensors && touch $@

run: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)./$(BUILD)/ddptop

test: deps
	$(Q)$(MAKE) --no-print-directory all pydeps
	$(Q)PY=$(PY) BUILD=$(BUILD) bash tests/run.sh

# The all-reduce alone, shared memory against Gloo over loopback TCP, side by
# side (docs/BENCHMARKS.md); COMM_ARGS e.g. "-n 4 4096 1048576".
COMM_ARGS ?= -n 2 4096 1048576 4194304
.PHONY: bench-comm
bench: bench-comm
bench-comm: $(BUILD)/tests/bench_comm
	$(Q)echo "bench-comm: all-reduce, shared memory (the default on one host)"
	$(Q)$(BUILD)/tests/bench_comm -a auto $(COMM_ARGS)
	$(Q)echo "bench-comm: all-reduce, Gloo over loopback TCP (DDPTOP_SHM=0)"
	$(Q)DDPTOP_SHM=0 $(BUILD)/tests/bench_comm -a auto $(COMM_ARGS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC    $<")
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cc
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CXX   $<")
	$(Q)$(CXX) $(CXXFLAGS) -c $< -o $@

$(BUILD)/libtransport.a: $(TRANSPORT_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^
$(BUILD)/libworkers.a: $(WORKER_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^
$(BUILD)/libtui.a: $(TUI_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/ddptop-worker: $(BUILD)/workers/main.o $(BUILD)/libworkers.a $(BUILD)/libtransport.a
	@$(if $(Q),echo "  LINK  $@")
	$(Q)$(CC) -o $@ $^ $(LDLIBS_Z) $(LDLIBS_W)

$(BUILD)/ddptop: $(BUILD)/tui/main.o $(BUILD)/libtui.a $(TUI_EXTRA_OBJ) $(BUILD)/libtransport.a
	@$(if $(Q),echo "  LINK  $@")
	$(Q)$(CC) -o $@ $^ $(LDLIBS_Z) $(LDLIBS_T)

# Tests and tools link everything; the linker takes what each needs.
$(BUILD)/tests/%: $(BUILD)/tests/%.o $(BUILD)/libtui.a $(BUILD)/libworkers.a $(BUILD)/libtransport.a
	@$(if $(Q),echo "  LINK  $@")
	$(Q)$(CC) -o $@ $^ $(LDLIBS_Z) $(LDLIBS_W) $(LDLIBS_T)

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
