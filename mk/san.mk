# mk/san.mk — the hostile-input scenarios against the sanitizer build.
#
#   make SAN=1 [targets]   everything with ASan + UBSan in build-san/ (Makefile)
#   make test-san          build that, then run tests/scenario/san/t_san_hostile.sh,
#                          which replays the most hostile scenarios against it
#
# make test runs t_san_hostile too, but only against an up-to-date build-san/
# (it skips otherwise: building the whole tree instrumented takes minutes).

.PHONY: test-san
test-san: pydeps
	$(Q)$(MAKE) --no-print-directory SAN=1 all
	$(Q)PY=$(PY) BUILD=$(BUILD) bash tests/run.sh san/
