#!/usr/bin/env bash
# examples/recordings/make.sh — regenerate the example recordings from real
# runs (a few seconds; CPU only). Usage: BUILD=build bash examples/recordings/make.sh
#   clean-4rank.rec    4 ranks, 60 steps over 2 epochs, an eval, a clean end
#   shutdown-hang.rec  rank 1 frozen (SIGSTOP) mid-training; a clean stop is
#                      asked (SIGTERM to ddptop); ranks 0, 2, 3 wait in their
#                      all-reduce for rank 1, the ladder (--stop-grace 3)
#                      sends SIGTERM, then SIGKILL ends rank 1
set -eu
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
case $BUILD in /*) DDPTOP=$BUILD/ddptop;; *) DDPTOP=$PWD/$BUILD/ddptop;; esac
[ -x "$DDPTOP" ] || { echo "make.sh: no $DDPTOP (run make first)" >&2; exit 1; }
OUT=examples/recordings
JOB=(--dataset synthetic --model mlp:32,64,10 --batch-size 64)
HANG_JOB=(--dataset synthetic --model mlp:32,512,512,10 --batch-size 256)
TMP=$(mktemp -d /tmp/ddptop-rec.XXXXXX)
dp=
trap '[ -n "$dp" ] && kill -9 $dp 2>/dev/null; rm -rf "$TMP"' EXIT
export OPENBLAS_NUM_THREADS=1

rm -f "$OUT/clean-4rank.rec" "$OUT/shutdown-hang.rec"
"$DDPTOP" run -n 4 --headless --record "$OUT/clean-4rank.rec" -- "${JOB[@]}" --epochs 3 --steps 60 >"$TMP/clean.out"
tail -5 "$TMP/clean.out"

# The hang: a long job; freeze rank 1 once every rank trains.
"$DDPTOP" run -n 4 --headless --stop-grace 3 --record "$OUT/shutdown-hang.rec" -- "${HANG_JOB[@]}" \
    --epochs 100000 --steps 100000000 --eval-every 0 >"$TMP/hang.out" 2>&1 &
dp=$!
rank1=
for _ in $(seq 100); do
    for p in $(pgrep -P $dp -x ddptop-worker); do
        tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx RANK=1 && rank1=$p
    done
    [ -n "$rank1" ] && grep -q "r3 .*train" "$TMP/hang.out" && break
    sleep 0.1
done
[ -n "$rank1" ] || { echo "make.sh: no rank 1 worker: $(tail -3 "$TMP/hang.out")" >&2; exit 1; }
sleep 1.5
kill -STOP "$rank1"        # rank 1 freezes mid-step; the others block in all-reduce
sleep 2
kill -TERM $dp             # a clean stop, as d in the screen
wait $dp || true           # exit 1: the job failed (rank 1 killed)
dp=
tail -6 "$TMP/hang.out"
ls -l "$OUT"/*.rec
