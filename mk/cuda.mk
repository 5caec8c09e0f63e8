# mk/cuda.mk — the CUDA build: cuda_mlp (compute), comm_nccl (NCCL) and gpu
# (devices, staging), plus `make test-gpu` and `make bench-gpu`.
#
# Included by the Makefile before its rules (HAVE_NVCC, HAVE_NCCL, BUILD,
# CUDA_HOME and the LDLIBS come from there). Whenever nvcc is found
# (CUDA_HOME ?= /usr/local/cuda; NO_CUDA=1 turns it off) the .cu files are
# compiled — also in CI, which has no GPU: the binaries then fail cleanly at
# run time ("no usable CUDA GPU") — otherwise their plain-C stand-ins
# (*_none.c), which fail with "built without CUDA". Without nccl.h, CUDA
# compute is built and NCCL is a stand-in. Callers never see the
# difference: the same headers, the same symbols.
#
# Code for sm_90 (H100/H200) plus PTX for compute_75, which the driver
# compiles at start for any other GPU this CUDA supports (Turing and later).
# Override with CUDA_ARCH, e.g. CUDA_ARCH='-gencode arch=compute_80,code=sm_80'.

NVCC      ?= $(CUDA_HOME)/bin/nvcc
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_75,code=compute_75
NVCCFLAGS ?= -O2 -g
NVCCFLAGS += -std=c++17 $(CUDA_ARCH) -Xcompiler -Wall,-Wextra -MMD -MP -Itransport -Iworkers
# python3 with PyTorch, for bench-gpu's side-by-side run (the GPU machine's).
TORCH_PY  ?= python3

CUDA_STUBS := workers/gpu_none.c workers/cuda_mlp_none.c workers/comm_nccl_none.c
ifneq ($(HAVE_NVCC),)
CUDA_CU := workers/gpu.cu workers/cuda_mlp.cu
CUDA_LIBS := -lcudart -lcublas
ifneq ($(HAVE_NCCL),)
CUDA_CU += workers/comm_nccl.cu
CUDA_LIBS += -lnccl
CUDA_KEEP := 
else
CUDA_KEEP := workers/comm_nccl_none.c
endif
WORKER_SRC := $(filter-out $(filter-out $(CUDA_KEEP),$(CUDA_STUBS)),$(WORKER_SRC))
WORKER_EXTRA_OBJ += $(CUDA_CU:%.cu=$(BUILD)/%.o)
LDLIBS_W += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 $(CUDA_LIBS)
CUDA_CONFIG := cuda=$(CUDA_HOME) nccl=$(if $(HAVE_NCCL),1,0) arch=$(CUDA_ARCH)
else
CUDA_CU :=
CUDA_CONFIG := none
endif

# The CPU-only worker (cpu/ddptop-worker, so its process is still named
# ddptop-worker): the same objects with the plain-C stand-ins in place of
# the .cu ones, linked without the CUDA libraries. ddptop starts it
# whenever a job runs on CPUs: the dynamic loader then has no cudart/
# cuBLAS/NCCL to map (0.11 s per start on the dev VM, twice on the way to
# the first step). Only in a CUDA build; elsewhere ddptop-worker is already
# CPU-only.
ifneq ($(HAVE_NVCC),)
CPU_WORKER := $(BUILD)/cpu/ddptop-worker
CPU_STUB_OBJ := $(CUDA_STUBS:workers/%.c=$(BUILD)/cpu/%.o)
LDLIBS_W_CPU := -lopenblas -lz -lgloo -lstdc++ -lpthread -lm
all: $(CPU_WORKER)
$(BUILD)/cpu/%.o: workers/%.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC    $< (cpu)")
	$(Q)$(CC) $(CFLAGS) -DDDPTOP_CPU_ONLY -c $< -o $@
$(BUILD)/libworkers-cpu.a: $(filter-out $(BUILD)/workers/comm_nccl_none.o,$(WORKER_SRC:%.c=$(BUILD)/%.o)) \
                           $(WORKER_CXX:%.cc=$(BUILD)/%.o) $(CPU_STUB_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^
$(CPU_WORKER): $(BUILD)/workers/main.o $(BUILD)/libworkers-cpu.a $(BUILD)/libtransport.a
	@$(if $(Q),echo "  LINK  $@")
	$(Q)$(CC) -o $@ $^ $(LDLIBS_Z) $(LDLIBS_W_CPU)
endif

# Switching between a CUDA and a plain build in one BUILD folder swaps
# objects in and out of libworkers.a: a stamp of the choice, newer when it
# changes, rebuilds the swapped objects and with them the archive.
CUDA_STAMP := $(BUILD)/.cuda-config
$(shell mkdir -p $(BUILD) && { [ "$$(cat $(CUDA_STAMP) 2>/dev/null)" = "$(CUDA_CONFIG)" ] || \
         echo "$(CUDA_CONFIG)" > $(CUDA_STAMP); })
$(CUDA_STUBS:%.c=$(BUILD)/%.o) $(CUDA_CU:%.cu=$(BUILD)/%.o): $(CUDA_STAMP)

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  NVCC  $<")
	$(Q)$(NVCC) $(NVCCFLAGS) -c $< -o $@

# GPU tests and benchmark. test_gpu sits beside the other test binaries, so
# `make test` runs it too: without a GPU it checks the clean failures and
# prints "SKIP: no GPU" (no failure); with one, everything.
GPU_TEST  := $(BUILD)/tests/test_gpu
GPU_BENCH := $(BUILD)/tests/gpu/bench_gpu
# The same cases against a CPU stand-in of the GPU modules (emu_cuda.c,
# linked ahead of the archive): they run in every `make test`, so the GPU
# test's own flow and comm.c's device-buffer staging are checked in CI.
GPU_TEST_EMU := $(BUILD)/tests/test_gpu_emu
# The worker itself over the same stand-in: tests/t_gpu_emu.sh runs
# `ddptop run --device cuda` through it (DDPTOP_WORKER), end to end.
GPU_WORKER_EMU := $(BUILD)/tests/gpu/ddptop-worker-emu

all: $(GPU_TEST) $(GPU_BENCH) $(GPU_TEST_EMU) $(GPU_WORKER_EMU)

$(GPU_WORKER_EMU): $(BUILD)/workers/main.o $(BUILD)/tests/gpu/emu_cuda.o $(BUILD)/libworkers.a $(BUILD)/libtransport.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK  $@")
	$(Q)$(CC) -o $@ $^ $(LDLIBS_Z) $(LDLIBS_W)

$(GPU_TEST_EMU): $(BUILD)/tests/gpu/test_gpu.o $(BUILD)/tests/gpu/emu_cuda.o \
                 $(BUILD)/libworkers.a $(BUILD)/libtransport.a
	@$(if $(Q),echo "  LINK  $@")
	$(Q)$(CC) -o $@ $^ $(LDLIBS_Z) $(LDLIBS_W)

$(GPU_TEST): $(BUILD)/tests/gpu/test_gpu.o $(BUILD)/libworkers.a $(BUILD)/libtransport.a
	@$(if $(Q),echo "  LINK  $@")
	$(Q)$(CC) -o $@ $^ $(LDLIBS_Z) $(LDLIBS_W)

$(GPU_BENCH): $(BUILD)/tests/gpu/bench_gpu.o $(BUILD)/libworkers.a $(BUILD)/libtransport.a
	@$(if $(Q),echo "  LINK  $@")
	$(Q)$(CC) -o $@ $^ $(LDLIBS_Z) $(LDLIBS_W)

.PHONY: test-gpu bench-gpu gpu-bins
gpu-bins: $(GPU_TEST) $(GPU_BENCH) $(BUILD)/ddptop $(BUILD)/ddptop-worker

# CUDA against the CPU oracle, NCCL at world size 1, the refusals; skips
# (exit 0) without a GPU.
test-gpu: $(GPU_TEST)
	$(Q)OPENBLAS_NUM_THREADS=1 $(GPU_TEST)

# Steps/s of cuda_mlp + NCCL against PyTorch eager DDP on the same GPU.
bench-gpu: $(GPU_BENCH)
	$(Q)TORCH_PY=$(TORCH_PY) bash tests/gpu/bench.sh $(GPU_BENCH)
