# mk/pyhook.mk — the torch adapter's DDP comm hook in C++ (workers/python/ddptop/_hook.cpp).
# Built where libtorch-dev's and pybind11-dev's headers are (make deps installs them), for the
# torch of $(PY_SYS) whose version it records; without them the adapter runs its Python hook.
# It goes into the package itself, beside the .py files, as `setup.py build_ext --inplace`
# would: $(BUILD)/python, the ranks' PYTHONPATH, is a link to workers/python, and the test
# frontends and the bench run the package from there too. Not under SAN=1 (a sanitized
# extension cannot load into an unsanitized python).
PY_HOOK_HDRS := /usr/include/torch/csrc/distributed/c10d/comm.hpp /usr/include/pybind11/pybind11.h
ifneq ($(SAN),1)
ifeq ($(words $(wildcard $(PY_HOOK_HDRS))),2)
PY_HOOK_CFG := $(shell $(PY_SYS) -c 'import sysconfig as s; print(s.get_config_var("EXT_SUFFIX") or "", s.get_paths()["include"])' 2>/dev/null)
ifneq ($(words $(PY_HOOK_CFG)),0)
PY_HOOK_SO := workers/python/ddptop/_hook$(word 1,$(PY_HOOK_CFG))
PY_HOOK_INC := $(word 2,$(PY_HOOK_CFG))
endif
endif
endif

ifneq ($(SAN),1)
clean: clean-pyhook      # not under SAN=1: its clean leaves the normal build alone
endif
.PHONY: clean-pyhook
clean-pyhook:
	rm -f workers/python/ddptop/_hook*.so workers/python/ddptop/_hook.torch-version

ifneq ($(PY_HOOK_SO),)
bins: $(PY_HOOK_SO)

# The torch the headers belong to: its version goes into the extension and beside it
# (_hook.torch-version), which the adapter compares with torch.__version__ before it
# imports it: a 1.13 extension loaded into a torch 2.x process would bring a second
# libtorch into it (cxx_hook.py).
# The step engine (_steps.cpp) encodes with transport/wire's own codec: those C files are
# compiled position-independent into the extension (one codec, in C, on both ends).
PY_HOOK_C   := transport/base/err.c transport/base/utf8.c transport/wire/protocol.c \
               $(wildcard transport/wire/codec_*.c)
PY_HOOK_COBJ := $(PY_HOOK_C:%.c=$(BUILD)/pyhook/%.o)
PY_HOOK_CXX := workers/python/ddptop/_hook.cpp workers/python/ddptop/_steps.cpp

$(BUILD)/pyhook/%.o: %.c mk/pyhook.mk
	@mkdir -p $(dir $@)
	$(Q)$(CC) -O2 -fPIC -std=c11 -D_GNU_SOURCE -Wall -Wextra -Itransport -MMD -MP -c $< -o $@

$(PY_HOOK_SO): $(PY_HOOK_CXX) workers/python/ddptop/_hook.h $(PY_HOOK_COBJ) mk/pyhook.mk
	@mkdir -p $(BUILD)/pyhook
	@$(if $(Q),echo "  CXX   $@ (the C++ comm hook and step engine, ~60 s)")
	$(Q)ver=$$($(PY_SYS) -c 'import torch; print(torch.__version__)' 2>/dev/null) || \
	  { echo "pyhook: no torch for $(PY_SYS): the adapter keeps its Python comm hook"; exit 0; }; \
	$(CXX) -O2 -shared -fPIC -std=c++17 -Wall -Wextra -D_GLIBCXX_USE_CXX11_ABI=1 \
	  -DDDPTOP_TORCH_VERSION="\"$$ver\"" -I$(PY_HOOK_INC) -I/usr/include/torch/csrc/api/include -Itransport \
	  -MMD -MP -MF $(BUILD)/pyhook/_hook.d -MT $@ $(PY_HOOK_CXX) $(PY_HOOK_COBJ) -o $@.tmp \
	  -ltorch_cpu -lc10 -ltorch -ltorch_python -lmsgpackc && \
	echo "$$ver" >workers/python/ddptop/_hook.torch-version && mv $@.tmp $@

-include $(BUILD)/pyhook/_hook.d $(PY_HOOK_COBJ:.o=.d)
endif
