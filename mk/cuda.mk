# mk/cuda.mk — the CUDA build: cuda_mlp (compute), comm_nccl (NCCL) and gpu
# (devices, staging), plus `make test-gpu` and `make bench-gpu`.
#
# Included at the end of the Makefile, which chooses the .cu files or their
# stand-ins (CUDA_CU, CUDA_DROP, EXT_cuda) and compiles them per layer.
#
# Code for sm_90 (H100/H200) plus PTX for compute_75, which the driver
# compiles at start for any other GPU this CUDA supports (Turing and later).
# Override with CUDA_ARCH, e.g. CUDA_ARCH='-gencode arch=compute_80,code=sm_80'.

NVCC      ?= $(CUDA_HOME)/bin/nvcc
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_75,code=compute_75
NVCCFLAGS ?= -O2 -g
NVCCFLAGS += -std=c++17 $(CUDA_ARCH) -Xcompiler -Wall,-Wextra -MMD -MP
# python3 with PyTorch, for bench-gpu's side-by-side run (the GPU machine's).
TORCH_PY  ?= python3

ifneq ($(HAVE_NVCC),)
CUDA_CONFIG := cuda=$(CUDA_HOME) nccl=$(if $(HAVE_NCCL),1,0) arch=$(CUDA_ARCH)
else
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
bins: $(CPU_WORKER)
$(BUILD)/cpu/cuda/%.o: workers/cuda/%.c | $(BUILD)/inc/cuda/.ok
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC    $< (cpu)")
	$(Q)$(CC) $(CFLAGS) -DDDPTOP_CPU_ONLY -I$(BUILD)/inc/cuda -c $< -o $@
$(BUILD)/cpu/comm/%.o: workers/comm/%.c | $(BUILD)/inc/comm/.ok
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC    $< (cpu)")
	$(Q)$(CC) $(CFLAGS) -DDDPTOP_CPU_ONLY -I$(BUILD)/inc/comm -c $< -o $@
$(BUILD)/libcuda-cpu.a: $(BUILD)/cpu/cuda/gpu_none.o $(BUILD)/cpu/cuda/cuda_mlp_none.o
	$(Q)rm -f $@ && ar rcs $@ $^
$(BUILD)/libcomm-cpu.a: $(filter-out $(BUILD)/workers/comm/comm_nccl.o,$(OBJ_comm)) $(BUILD)/cpu/comm/comm_nccl_none.o
	$(Q)rm -f $@ && ar rcs $@ $^
CPU_WORKER_LIBS := $(subst $(BUILD)/libcuda.a,$(BUILD)/libcuda-cpu.a,$(subst $(BUILD)/libcomm.a,$(BUILD)/libcomm-cpu.a,$(WORKER_LIBS)))
$(CPU_WORKER): $(BUILD)/workers/main.o $(CPU_WORKER_LIBS)
	@$(if $(Q),echo "  LINK  $@")
	$(Q)$(CC) -o $@ $^ $(filter-out $(EXT_cuda),$(WORKER_EXT))
endif

# Switching between a CUDA and a plain build in one BUILD folder swaps
# objects in and out of libworkers.a: a stamp of the choice, newer when it
# changes, rebuilds the swapped objects and with them the archive.
CUDA_STAMP := $(BUILD)/.cuda-config
$(shell mkdir -p $(BUILD) && { [ "$$(cat $(CUDA_STAMP) 2>/dev/null)" = "$(CUDA_CONFIG)" ] || \
         echo "$(CUDA_CONFIG)" > $(CUDA_STAMP); })
$(CUDA_STUBS:%.c=$(BUILD)/%.o) $(CUDA_CU:%.cu=$(BUILD)/%.o): $(CUDA_STAMP)

# GPU tests and benchmark. test_gpu sits beside the other test binaries, so
# `make test` runs it too: without a GPU it checks the clean failures and
# prints "SKIP: no GPU" (no failure); with one, everything.
GPU_TEST  := $(BUILD)/tests/test_gpu
GPU_BENCH := $(BUILD)/tests/gpu/bench_gpu
# The same cases against a CPU stand-in of the GPU modules (emu_cuda.c,
# linked ahead of the archive): they run in every `make test`, so the GPU
# test's own flow and comm.c's device-buffer staging are checked in CI.
GPU_TEST_EMU := $(BUILD)/tests/test_gpu_emu
# The worker itself over the same stand-in: tests/scenario/gpu/t_gpu_emu.sh runs
# `ddptop run --device cuda` through it (DDPTOP_WORKER), end to end.
GPU_WORKER_EMU := $(BUILD)/tests/gpu/ddptop-worker-emu

all: $(GPU_TEST) $(GPU_BENCH) $(GPU_TEST_EMU) $(GPU_WORKER_EMU)

# The emulated ones link emu_cuda.o ahead of the archives, so its symbols win.
$(GPU_WORKER_EMU): $(BUILD)/workers/main.o $(BUILD)/tests/gpu/emu_cuda.o $(WORKER_LIBS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK  $@")
	$(Q)$(CC) -o $@ $^ $(WORKER_EXT)

$(GPU_TEST_EMU): $(BUILD)/tests/gpu/test_gpu.o $(BUILD)/tests/gpu/emu_cuda.o $(WORKER_LIBS)
	@$(if $(Q),echo "  LINK  $@")
	$(Q)$(CC) -o $@ $^ $(WORKER_EXT)

$(GPU_TEST): $(BUILD)/tests/gpu/test_gpu.o $(WORKER_LIBS)
	@$(if $(Q),echo "  LINK  $@")
	$(Q)$(CC) -o $@ $^ $(WORKER_EXT)

$(GPU_BENCH): $(BUILD)/tests/gpu/bench_gpu.o $(WORKER_LIBS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK  $@")
	$(Q)$(CC) -o $@ $^ $(WORKER_EXT)

.PHONY: test-gpu bench-gpu gpu-bins
gpu-bins: $(GPU_TEST) $(GPU_BENCH) $(BUILD)/ddptop $(BUILD)/ddptop-worker

# CUDA against the CPU oracle, NCCL at world size 1, the refusals; skips
# (exit 0) without a GPU.
test-gpu: $(GPU_TEST)
	$(Q)OPENBLAS_NUM_THREADS=1 $(GPU_TEST)

# Steps/s of cuda_mlp + NCCL against PyTorch eager DDP on the same GPU.
bench-gpu: $(GPU_BENCH)
	$(Q)TORCH_PY=$(TORCH_PY) bash tests/gpu/bench.sh $(GPU_BENCH)
