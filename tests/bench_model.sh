#!/usr/bin/env bash
# tests/bench_model.sh — `make bench-model`: instructions per message of the
# frontend's work after decoding (the sender check, the viewers' snapshot,
# the job model: tui/run/inbox.c run_take_msg), counted by callgrind on
# tests/tools/bench_model.c's stream (tool_load's ranks: per step a coll per
# bucket and a step, a beat a second). Instruction counts are the same from
# run to run, where wall-clock time on a shared 2-core VM moves by +-20%.
# One row per world size: Ir per step, coll and beat message (the inclusive
# cost of bm_feed_step, _coll and _beat over the measured steps, divided by
# how many were fed), per message of the mix, and the mix's split between
# the job model (job_apply), the viewers' snapshot (viewers_keep_msg) and
# the rest (the check, the dispatch). digest: what the model shows at the
# end (bench_model.c), which a change to this path must leave as it was.
# Env: BUILD, ROWS ("64 256 1024"), WARMUP (300 steps), STEPS (100),
# BUCKETS (1), KEEP (a directory for the callgrind files).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ROWS=${ROWS:-64 256 1024}
WARMUP=${WARMUP:-300}
STEPS=${STEPS:-100}
BUCKETS=${BUCKETS:-1}
TOOL=$BUILD/tests/bench_model
[ -x "$TOOL" ] || { echo "bench-model: no $TOOL (make all)"; exit 2; }
command -v valgrind >/dev/null && command -v callgrind_annotate >/dev/null ||
    { echo "bench-model: valgrind (callgrind) is needed: apt-get install valgrind"; exit 2; }
TMP=$(mktemp -d /tmp/ddptop-bench-model.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# The inclusive Ir of function $2 in callgrind file $1 (0 when absent).
incl() {
    callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
        awk -v fn="$2" '$0 ~ (":" fn " \\[") { x = $1; gsub(",", "", x); print x; found = 1; exit }
                        END { if (!found) print 0 }'
}
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" "$1"; }
per() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.0f", a / b; else printf "-" }'; }

printf 'bench-model: Ir per message (callgrind), warmup %s steps, %s measured, %s bucket(s)\n' "$WARMUP" "$STEPS" "$BUCKETS"
printf '%6s %8s %8s %8s %8s  %8s %8s %8s  %s\n' ranks step coll beat mix model viewers rest digest
for n in $ROWS; do
    out=$TMP/cg.$n
    valgrind --tool=callgrind --toggle-collect=bm_measure --callgrind-out-file="$out" \
        "$TOOL" -r "$n" -w "$WARMUP" -s "$STEPS" -b "$BUCKETS" >"$TMP/line.$n" 2>"$TMP/vg.$n" ||
        { echo "bench-model: $n ranks failed"; cat "$TMP/vg.$n" "$TMP/line.$n"; exit 1; }
    ns=$(field "$TMP/line.$n" step) nc=$(field "$TMP/line.$n" coll) ne=$(field "$TMP/line.$n" beat)
    is=$(incl "$out" bm_feed_step) ic=$(incl "$out" bm_feed_coll) ie=$(incl "$out" bm_feed_beat)
    im=$(incl "$out" job_apply) iv=$(incl "$out" viewers_keep_msg)
    all=$((ns + nc + ne)) tot=$((is + ic + ie))
    printf '%6s %8s %8s %8s %8s  %8s %8s %8s  %s\n' "$n" "$(per "$is" "$ns")" "$(per "$ic" "$nc")" \
        "$(per "$ie" "$ne")" "$(per "$tot" "$all")" "$(per "$im" "$all")" "$(per "$iv" "$all")" \
        "$(per $((tot - im - iv)) "$all")" "$(field "$TMP/line.$n" digest)"
    [ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$out" "$KEEP/callgrind.$n.out"
done
