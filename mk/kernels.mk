# mk/kernels.mk — the numeric tests under other kernels (issue 28; CI does not run it).
#
#   make test-kernels   tests/kernels.sh: each numeric test (unit and scenario) once per
#                       OPENBLAS_CORETYPE, ATEN_CPU_CAPABILITY and ONEDNN_MAX_CPU_ISA this
#                       CPU can run, then a table of pass/fail per setting
#
# KERNEL_TESTS / KERNEL_ROWS narrow it, e.g.
#   make test-kernels KERNEL_TESTS=t_precision_torch KERNEL_ROWS="default OPENBLAS_CORETYPE=Haswell"

.PHONY: test-kernels
KERNEL_TESTS ?=
KERNEL_ROWS ?=

test-kernels: deps
	$(Q)$(MAKE) --no-print-directory -j$(BUILD_JOBS) all pydeps
	$(Q)PY=$(PY) BUILD=$(BUILD) KERNEL_TESTS="$(KERNEL_TESTS)" KERNEL_ROWS="$(KERNEL_ROWS)" bash tests/kernels.sh
