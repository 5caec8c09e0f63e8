# ddptop — one GNU Makefile. `make run`, `make test`; V=1 for full commands.
# Overridable: CC, CXX, CUDA_HOME, NO_CUDA=1, T=PATTERN (make test: only the
# tests whose names contain PATTERN).
#
# Every subsystem is a folder and a library (build/lib<name>.a). A folder
# compiles with one include directory, build/inc/<name>/, holding links to
# itself and to the folders it may use (LAYERS below), so an include of
# anything else fails the build; includes name the folder ("wire/codec.h").
# docs/ARCHITECTURE.md draws the same map.

CC       ?= gcc
CXX      ?= g++
CUDA_HOME ?= /usr/local/cuda
BUILD    := build
PY_SYS   := /usr/bin/python3
PYENV    := $(BUILD)/pyenv
PY       := $(PYENV)/bin/python

# SAN=1: the whole build (ddptop, the worker, tests, tools) with ASan and
# UBSan, UBSan fatal, in its own folder build-san/ and without CUDA; the
# sanitizers ride on CC and CXX, so every compile and link gets them.
# `make SAN=1 test T=...` runs tests against it (docs/RELIABILITY.md).
ifeq ($(SAN),1)
BUILD    := build-san
NO_CUDA  := 1
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
override CC  += $(SAN_FLAGS)
override CXX += $(SAN_FLAGS)
endif

CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -D_GNU_SOURCE -Wall -Wextra -MMD -MP
CXXFLAGS ?= -O2 -g
CXXFLAGS += -std=c++17 -Wall -Wextra -MMD -MP

ifeq ($(V),1)
Q :=
else
Q := @
endif

# Debian packages the project needs (make deps installs the missing ones).
DEB_PKGS := build-essential pkg-config libncurses-dev libzmq3-dev libmsgpack-dev libgloo-dev \
            libopenblas-dev zlib1g-dev tmux dataset-fashion-mnist python3 python3-venv \
            python3-pip python3-msgpack python3-zmq python3-numpy procps iproute2 util-linux
# Installed without their recommends (python3-torch's pull hundreds of MB):
# PyTorch for the tests of the torch adapter and the side-by-side checks;
# libtorch's and pybind11's headers for the adapter's C++ comm hook (mk/pyhook.mk).
DEB_PKGS_NOREC := python3-torch libtorch-dev pybind11-dev

# --- CUDA / NCCL detection (mk/cuda.mk builds the .cu files when nvcc is here) ---
ifeq ($(NO_CUDA),1)
HAVE_NVCC :=
else
HAVE_NVCC := $(wildcard $(CUDA_HOME)/bin/nvcc)
HAVE_NCCL := $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h)
endif
# With nvcc the .cu files are compiled (also in CI, which has no GPU: the
# binaries then fail cleanly at run time, "no usable CUDA GPU"), otherwise
# their plain-C stand-ins (*_none.c, "built without CUDA"); without nccl.h,
# CUDA compute is built and NCCL is a stand-in. Callers never see the
# difference: the same headers, the same symbols. CUDA_DROP: the stand-ins
# a .cu file replaces. mk/cuda.mk has the rest (nvcc, the CPU-only worker,
# make test-gpu and bench-gpu).
CUDA_STUBS := workers/cuda/gpu_none.c workers/cuda/cuda_mlp_none.c workers/comm/comm_nccl_none.c
ifneq ($(HAVE_NVCC),)
CUDA_CU    := workers/cuda/gpu.cu workers/cuda/cuda_mlp.cu workers/cuda/cuda_gemm.cu workers/cuda/cuda_kernels.cu workers/cuda/cuda_step.cu
CUDA_DROP  := workers/cuda/gpu_none.c workers/cuda/cuda_mlp_none.c
EXT_cuda   := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lcublas -lcublasLt
ifneq ($(HAVE_NCCL),)
CUDA_CU    += workers/comm/comm_nccl.cu
CUDA_DROP  += workers/comm/comm_nccl_none.c
EXT_cuda   += -lnccl
endif
endif

# --- Layers: each folder, the tree it lives in, what it may include ---------
# transport/: the wire, shared by everyone (base helpers, wire format, sockets).
# workers/:   ddptop-worker.   tui/: ddptop.   DEPS_x is the whole set x may
# use (already closed under "uses"); the link order is LINK_ORDER's.
T_LAYERS := base wire net
W_LAYERS := nn data ckpt cuda comm ddp link train
U_LAYERS := model view screen launch record attach cluster run cmd
LAYERS   := $(T_LAYERS) $(W_LAYERS) $(U_LAYERS)
$(foreach l,$(T_LAYERS),$(eval TREE_$(l) := transport))
$(foreach l,$(W_LAYERS),$(eval TREE_$(l) := workers))
$(foreach l,$(U_LAYERS),$(eval TREE_$(l) := tui))

DEPS_base    :=
DEPS_wire    := base
DEPS_net     := base wire
DEPS_nn      := base wire
DEPS_data    := base wire
DEPS_ckpt    := base wire nn
DEPS_cuda    := base wire nn
DEPS_comm    := base wire nn cuda
DEPS_ddp     := base wire nn cuda comm
DEPS_link    := base wire net
DEPS_train   := base wire net nn data ckpt cuda comm ddp link
DEPS_model   := base wire
DEPS_view    := base wire model
DEPS_screen  := base wire model view
DEPS_launch  := base wire
DEPS_record  := base wire model view
DEPS_attach  := base wire net model view
DEPS_cluster := base wire net launch
DEPS_run     := base wire net model view screen launch record attach cluster
DEPS_cmd     := base wire net model view screen launch record attach cluster run
LINK_ORDER   := cmd run cluster attach record screen view model launch \
                train link ddp comm cuda ckpt data nn net wire base

# Outside libraries each layer needs at link time.
EXT_wire   := $(shell pkg-config --libs msgpack 2>/dev/null || echo -lmsgpackc) -lm
EXT_net    := $(shell pkg-config --libs libzmq 2>/dev/null || echo -lzmq)
EXT_nn     := -lopenblas -lm
EXT_data   := -lz
EXT_ckpt   := -lz
EXT_comm   := -lgloo -lstdc++ -lpthread
EXT_ddp    := -lpthread
EXT_train  := -lm
EXT_model  := -lm
EXT_screen := -lncursesw -ltinfo
EXT_launch := -lpthread
EXT_run    := -lm

# Sources of a layer: its .c and .cc files, and the .cu ones chosen above.
layer_src  = $(filter-out $(CUDA_DROP),$(wildcard $(TREE_$(1))/$(1)/*.c $(TREE_$(1))/$(1)/*.cc)) \
             $(filter $(TREE_$(1))/$(1)/%,$(CUDA_CU))
obj_of     = $(patsubst %,$(BUILD)/%.o,$(basename $(1)))
$(foreach l,$(LAYERS),$(eval OBJ_$(l) := $(call obj_of,$(call layer_src,$(l)))))
# The layers a set of layers pulls in, in link order, and their libraries.
closure    = $(filter $(sort $(1) $(foreach l,$(1),$(DEPS_$(l)))),$(LINK_ORDER))
libs_of    = $(foreach l,$(call closure,$(1)),$(BUILD)/lib$(l).a)
ext_of     = $(foreach l,$(call closure,$(1)),$(EXT_$(l)))
# The layers a source file's includes name ("wire/codec.h" -> wire).
incl_of    = $(filter $(LAYERS),$(shell sed -n 's|^[ \t]*\#[ \t]*include "\([a-z]*\)/.*|\1|p' $(1) | sort -u))

# One compile rule set per layer: its own include directory, nothing else.
define LAYER_RULES
$(BUILD)/$(TREE_$(1))/$(1)/%.o: $(TREE_$(1))/$(1)/%.c | $(BUILD)/inc/$(1)/.ok
	@mkdir -p $$(dir $$@)
	@$$(if $$(Q),echo "  CC    $$<")
	$$(Q)$$(CC) $$(CFLAGS) -I$(BUILD)/inc/$(1) -c $$< -o $$@
$(BUILD)/$(TREE_$(1))/$(1)/%.o: $(TREE_$(1))/$(1)/%.cc | $(BUILD)/inc/$(1)/.ok
	@mkdir -p $$(dir $$@)
	@$$(if $$(Q),echo "  CXX   $$<")
	$$(Q)$$(CXX) $$(CXXFLAGS) -I$(BUILD)/inc/$(1) -c $$< -o $$@
$(BUILD)/$(TREE_$(1))/$(1)/%.o: $(TREE_$(1))/$(1)/%.cu | $(BUILD)/inc/$(1)/.ok
	@mkdir -p $$(dir $$@)
	@$$(if $$(Q),echo "  NVCC  $$<")
	$$(Q)$$(NVCC) $$(NVCCFLAGS) -I$(BUILD)/inc/$(1) -c $$< -o $$@
$(BUILD)/lib$(1).a: $$(OBJ_$(1))
	$$(Q)rm -f $$@ && ar rcs $$@ $$^
endef
$(foreach l,$(LAYERS),$(eval $(call LAYER_RULES,$(l))))

# Include sets beyond the layers: the worker's main (all of workers/ and
# transport/), examples (transport/'s public face), tests and tools (all).
INCSET_worker   := $(T_LAYERS) $(W_LAYERS)
INCSET_examples := base wire net
INCSET_tests    := $(LAYERS)
$(foreach l,$(LAYERS),$(eval INCSET_$(l) := $(l) $(DEPS_$(l))))
# build/inc/<set>/<layer> -> that layer's folder, for every layer the set may use.
define INC_RULE
$(BUILD)/inc/$(1)/.ok: Makefile
	@rm -rf $(BUILD)/inc/$(1) && mkdir -p $(BUILD)/inc/$(1)
	$(Q)$(foreach l,$(INCSET_$(1)),ln -sfn "$$$$(realpath -m --relative-to=$(BUILD)/inc/$(1) $(TREE_$(l))/$(l))" $(BUILD)/inc/$(1)/$(l) &&) touch $$@
endef
$(foreach s,$(LAYERS) worker examples tests,$(eval $(call INC_RULE,$(s))))

BINS := $(BUILD)/ddptop $(BUILD)/ddptop-worker

# ddptop: tui/cmd/ and every tui layer; ddptop-worker: workers/main.c and
# every worker layer. Neither links the other's tree.
CMD_OBJ := $(OBJ_cmd)
$(BUILD)/workers/main.o: workers/main.c | $(BUILD)/inc/worker/.ok
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC    $<")
	$(Q)$(CC) $(CFLAGS) -I$(BUILD)/inc/worker -c $< -o $@

WORKER_LIBS = $(call libs_of,train)
WORKER_EXT  = $(call ext_of,train)
$(BUILD)/ddptop-worker: $(BUILD)/workers/main.o $(WORKER_LIBS)
	@$(if $(Q),echo "  LINK  $@")
	$(Q)$(CC) -o $@ $^ $(WORKER_EXT)

# cmd objects are linked as objects, not an archive (main is among them).
$(BUILD)/ddptop: $(OBJ_cmd) $(call libs_of,$(DEPS_cmd))
	@$(if $(Q),echo "  LINK  $@")
	$(Q)$(CC) -o $@ $^ $(call ext_of,$(DEPS_cmd))

# --- Tests and tools: each links the layers its includes name, no more ----
TEST_SRC := $(wildcard tests/unit/test_*.c)
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
TOOL_SRC := $(wildcard tests/tools/*.c)
TOOL_BIN := $(TOOL_SRC:tests/tools/%.c=$(BUILD)/tests/%)

$(BUILD)/tests/%.o: tests/unit/%.c | $(BUILD)/inc/tests/.ok
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC    $<")
	$(Q)$(CC) $(CFLAGS) -I$(BUILD)/inc/tests -Itests -c $< -o $@
$(BUILD)/tests/%.o: tests/tools/%.c | $(BUILD)/inc/tests/.ok
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC    $<")
	$(Q)$(CC) $(CFLAGS) -I$(BUILD)/inc/tests -Itests -c $< -o $@
$(BUILD)/tests/gpu/%.o: tests/gpu/%.c | $(BUILD)/inc/tests/.ok
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC    $<")
	$(Q)$(CC) $(CFLAGS) -I$(BUILD)/inc/tests -Itests -c $< -o $@
$(BUILD)/examples/%.o: examples/%.c | $(BUILD)/inc/examples/.ok
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC    $<")
	$(Q)$(CC) $(CFLAGS) -I$(BUILD)/inc/examples -c $< -o $@

# A program from one source: link the layers it names (and theirs).
define PROG_RULE
$(1): $(2) $(call libs_of,$(call incl_of,$(3)))
	@mkdir -p $$(dir $$@)
	@$$(if $$(Q),echo "  LINK  $$@")
	$$(Q)$$(CC) -o $$@ $$^ $(call ext_of,$(call incl_of,$(3)))
endef
$(foreach s,$(TEST_SRC),$(eval $(call PROG_RULE,$(s:tests/unit/%.c=$(BUILD)/tests/%),$(s:tests/unit/%.c=$(BUILD)/tests/%.o),$(s))))
$(foreach s,$(TOOL_SRC),$(eval $(call PROG_RULE,$(s:tests/tools/%.c=$(BUILD)/tests/%),$(s:tests/tools/%.c=$(BUILD)/tests/%.o),$(s))))

.PHONY: all bins deps pydeps run test bench clean info check-deps check-layers format
# Keep test objects: they are intermediate in a pattern chain.
.SECONDARY:
.DEFAULT_GOAL := all

# The torch adapter beside ddptop: `ddptop run SCRIPT.py` puts $(BUILD)/python
# first on the ranks' PYTHONPATH (a link, so an edit needs no rebuild).
PY_ADAPTER := $(BUILD)/python
$(PY_ADAPTER):
	@mkdir -p $(BUILD)
	$(Q)ln -sfn "$$(realpath -m --relative-to=$(BUILD) workers/python)" $@

# `make bins`: what `make run` runs and nothing else (ddptop, the worker, the
# adapter's link; mk/cuda.mk adds the CPU-only worker, mk/pyhook.mk the
# adapter's C++ hook). Tests, tools, benchmarks, examples and GPU test
# binaries are built by `all` and by the targets that run them.
bins: info $(BINS) $(PY_ADAPTER)

all: bins $(TEST_BIN) $(TOOL_BIN)

info:
	@printf 'ddptop build: '; \
	 if [ -n "$(HAVE_NVCC)" ]; then printf '✓ nvcc (%s) ' "$(CUDA_HOME)"; else printf '✗ nvcc '; fi; \
	 if [ -n "$(HAVE_NCCL)" ]; then printf '✓ nccl '; else printf '✗ nccl '; fi; \
	 if [ -f /usr/lib/libgloo.so ]; then printf '✓ gloo '; else printf '✗ gloo '; fi; \
	 if [ -n "$(PY_HOOK_SO)" ]; then printf '✓ torch C++ hook '; else printf '✗ torch C++ hook '; fi; \
	 if [ -n "$(HAVE_NVCC)" ]; then printf '(CUDA backend built: --device cuda%s)\n' "$(if $(HAVE_NCCL), --backend nccl|gloo, --backend gloo)"; else printf '(CPU build: no CUDA backend)\n'; fi

# Install missing Debian packages; without root print the apt-get line.
missing_of = for p in $(1); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done
deps:
	$(Q)missing=$$($(call missing_of,$(DEB_PKGS))); norec=$$($(call missing_of,$(DEB_PKGS_NOREC))); \
	if [ -z "$$missing$$norec" ]; then echo "deps: all Debian packages present"; exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "deps: missing packages; run: sudo apt-get update && sudo apt-get install -y $$missing$${norec:+ && sudo apt-get install -y --no-install-recommends $$norec}"; exit 1; fi; \
	echo "deps: installing$$(echo ' '$$missing $$norec)"; \
	export DEBIAN_FRONTEND=noninteractive; apt-get update -q >/dev/null && \
	{ [ -z "$$missing" ] || apt-get install -y -q $$missing >/dev/null; } && \
	{ [ -z "$$norec" ] || apt-get install -y -q --no-install-recommends $$norec >/dev/null; } || { echo "deps: apt-get failed"; exit 1; }

# Python with a real safetensors reader for the tests (PyPI), over Debian's
# msgpack/zmq/numpy.
pydeps: $(PYENV)/.ok
$(PYENV)/.ok:
	$(Q)$(PY_SYS) -m venv --system-site-packages $(PYENV) && \
	 $(PYENV)/bin/pip install -q --disable-pip-version-check safetensors && touch $@

# The build before `make run` and `make test` takes every core (a fresh clone's
# build was two of CI's twelve minutes one file at a time). The scenario tests
# run TEST_JOBS at a time (tests/run.sh; they mostly wait on timeouts, hangs and
# ranks: 22 minutes of them on the 2-core VM, 11 two at a time, 7.5 three at a
# time, every test passing), TEST_JOBS=1 one after the other.
BUILD_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
TEST_JOBS ?= 3
run: deps
	$(Q)$(MAKE) --no-print-directory -j$(BUILD_JOBS) bins
	$(Q)./$(BUILD)/ddptop

test: deps
	$(Q)$(MAKE) --no-print-directory -j$(BUILD_JOBS) all pydeps
	$(Q)$(MAKE) --no-print-directory check-layers
	$(Q)PY=$(PY) BUILD=$(BUILD) TEST_JOBS=$(TEST_JOBS) bash tests/run.sh $(T)

# The layering, proven: the job model links with msgpack and libm alone (no
# ncurses, no ZeroMQ), transport without workers/ or tui/, and an include
# across the rules fails to compile (tests/layers.sh).
check-layers: $(call libs_of,model) $(call libs_of,net) $(BUILD)/tests/test_job.o $(BUILD)/tests/test_codec.o
	$(Q)BUILD=$(BUILD) CC="$(CC)" CFLAGS="$(CFLAGS)" EXT_MODEL="$(call ext_of,model)" \
	  EXT_NET="$(call ext_of,net)" LIBS_MODEL="$(call libs_of,model)" LIBS_NET="$(call libs_of,net)" \
	  LAYERS="$(LAYERS)" bash tests/layers.sh

# The tree through clang-format (.clang-format at the root).
format:
	$(Q)git ls-files '*.c' '*.h' '*.cc' '*.cu' '*.cuh' | xargs clang-format -i

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

clean:
	rm -rf $(BUILD)

# Feature fragments (mk/*.mk: CUDA, benchmarks, examples), after the layers
# they build on.
-include $(sort $(wildcard mk/*.mk))

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
