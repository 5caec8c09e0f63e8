#!/usr/bin/env bash
# tests/bench_model.sh — `make bench-model`: instructions per message of the
# frontend's work after decoding (the sender check, the viewers' snapshot,
# the job model: tui/run/inbox.c run_take_msg), counted by callgrind on
# tests/tools/bench_model.c's stream (tool_load's ranks: per step a coll per
# bucket and a step, a beat a second). Instruction counts are the same from
# run to run, where wall-clock time on a shared 2-core VM moves by +-20%.
# Rows per world size and kind (step, coll, beat, and the mix of them): Ir
# per message in take_msg, the function take_burst calls for each message
# (the path: its inclusive cost under bm_feed_step, _coll or _beat over the
# measured steps, divided by how many were fed; bench_model's own wrapper,
# run_take_msg, left out), split into the job model (job_apply), the
# viewers' snapshot (viewers_keep_msg) and the rest (the sender check, the
# dispatch). digest: what the model shows at the end (bench_model.c),
# which a change to this path must leave as it was.
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

# The inclusive Ir of function $2 in callgrind file $1 where it ran under
# bm_feed_$3 (callgrind --separate-callers tells the contexts apart): the
# sum over its contexts whose caller chain holds bm_feed_$3. A function
# with code inlined from a header is listed once more, under the header's
# name, without that code's callees: of a context's lines the largest is its
# cost.
incl() {
    callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
        awk -v fn="$2" -v kind="bm_feed_$3" '
            !/=>/ && $0 ~ ("[:]" fn "\047") && index($0, kind "\047") {
                x = $1; gsub(",", "", x)
                key = substr($0, index($0, ":" fn "\047")); sub(/ \[.*$/, "", key)
                if (x + 0 > best[key]) best[key] = x + 0
            }
            END { for (k in best) sum += best[k]; print sum + 0 }'
}
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" "$1"; }
per() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.0f", a / b; else printf "-" }'; }

printf 'bench-model: Ir per message (callgrind) in take_msg, warmup %s steps, %s measured, %s bucket(s)\n' \
    "$WARMUP" "$STEPS" "$BUCKETS"
printf '%6s %5s %8s %8s %8s %8s  %s\n' ranks kind path model viewers check digest
for n in $ROWS; do
    out=$TMP/cg.$n
    valgrind --tool=callgrind --toggle-collect=bm_measure --separate-callers=6 --callgrind-out-file="$out" \
        "$TOOL" -r "$n" -w "$WARMUP" -s "$STEPS" -b "$BUCKETS" >"$TMP/line.$n" 2>"$TMP/vg.$n" ||
        { echo "bench-model: $n ranks failed"; cat "$TMP/vg.$n" "$TMP/line.$n"; exit 1; }
    digest=$(field "$TMP/line.$n" digest)
    tp=0 tm=0 tv=0 tn=0
    for k in step coll beat; do
        cnt=$(field "$TMP/line.$n" $k)
        p=$(incl "$out" take_msg $k) m=$(incl "$out" job_apply $k) v=$(incl "$out" viewers_keep_msg $k)
        printf '%6s %5s %8s %8s %8s %8s\n' "$n" $k "$(per "$p" "$cnt")" "$(per "$m" "$cnt")" "$(per "$v" "$cnt")" \
            "$(per $((p - m - v)) "$cnt")"
        tp=$((tp + p)) tm=$((tm + m)) tv=$((tv + v)) tn=$((tn + cnt))
    done
    printf '%6s %5s %8s %8s %8s %8s  %s\n' "$n" mix "$(per $tp $tn)" "$(per $tm $tn)" "$(per $tv $tn)" \
        "$(per $((tp - tm - tv)) $tn)" "$digest"
    if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$out" "$KEEP/callgrind.$n.out"; fi
done
