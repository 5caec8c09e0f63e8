# mk/publish.mk — what a --publish subscriber that keeps up gets beside a
# stalled one: `make bench-publish` (not part of `make bench`, about a
# minute). tests/tools/bench_publish.c, once with the plain PUB ddptop had
# (old) and once through publisher_send (product), a reader at most LAG
# frames behind whenever a frame goes out (-b), then readers in a thread of
# their own at a paced rate; one line a case (docs/RECORDING.md, "The live
# stream"). Override: BENCH_PUBLISH_N (frames a case).
BENCH_PUBLISH_N ?= 50000

.PHONY: bench-publish
bench-publish: $(BUILD)/tests/bench_publish
	$(Q)set -e; B=$(BUILD)/tests/bench_publish; N=$(BENCH_PUBLISH_N); \
	for p in old product; do \
	  $$B -t inproc -m same -H 100 -n $$N -p $$p; \
	  $$B -t inproc -m same -H 1000 -R 1 -b 400 -n $$N -p $$p; \
	  $$B -t ipc -m same -H 1000 -R 1 -b 400 -n $$N -p $$p; \
	  $$B -t inproc -m same -H 10000 -R 1 -b 4900 -n $$N -p $$p; \
	  $$B -t ipc -m thread -H 10000 -r 20000 -n $$N -p $$p; \
	  $$B -t tcp -m thread -H 10000 -r 20000 -n $$N -p $$p; \
	done
