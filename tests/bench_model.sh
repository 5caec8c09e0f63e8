#!/usr/bin/env bash
# tests/bench_model.sh — `make bench-model`: instructions per message of the
# frontend's work after decoding (the sender check, the viewers' snapshot,
# the job model: tui/run/inbox.c take_msgs, what take_burst does with a
# burst's decoded messages), counted by callgrind on
# tests/tools/bench_model.c's stream (tool_load's ranks: per step a coll per
# bucket and a step, a beat a second, a burst per rank every 50 ms).
# Instruction counts are the same from run to run, where wall-clock time on
# a shared 2-core VM moves by +-20%.
# One row per world size: Ir per message of the stream (take_msgs'
# inclusive cost over the measured steps, divided by the messages fed;
# bench_model's own wrapper left out), split into the job model
# (job_apply_burst, job_apply), the viewers' snapshot (viewers_keep_msgs, _msg) and
# the rest (the sender check, the dispatch). Then, at the first size, a
# coll's share (the difference a run with one bucket more makes, per coll
# more) and a step's (what is left, per step, with the beats' share: one
# beat per 100 steps). digest: what the model shows at the end
# (bench_model.c), which a change to this path must leave as it was.
# A build from before take_msgs (one message at a time: take_msg) is
# counted the same way: BUILD=that build's directory.
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

# The inclusive Ir of function $2 in callgrind file $1 (0 when it never
# ran). A function with code inlined from a header is listed once more,
# under the header's name, without that code's callees: the largest line
# is its cost.
incl() {
    callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
        awk -v fn="$2" '!/=>/ && $0 ~ ("[:]" fn "( |$)") { x = $1; gsub(",", "", x); if (x + 0 > best) best = x + 0 }
                        END { print best + 0 }'
}
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" "$1"; }
per() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.0f", a / b; else printf "-" }'; }

# run NAME RANKS BUCKETS: sets P M V (Ir of the path, the model, the
# viewers), NS NC NB (steps, colls, beats measured) and D (the digest).
run() {
    local out=$TMP/cg.$1
    valgrind --tool=callgrind --toggle-collect=bm_measure --callgrind-out-file="$out" \
        "$TOOL" -r "$2" -w "$WARMUP" -s "$STEPS" -b "$3" >"$TMP/line.$1" 2>"$TMP/vg.$1" ||
        { echo "bench-model: $2 ranks failed"; cat "$TMP/vg.$1" "$TMP/line.$1"; exit 1; }
    P=$(incl "$out" take_msgs)
    [ "$P" = 0 ] && P=$(incl "$out" take_msg) # a build before take_msgs
    M=$(($(incl "$out" job_apply_burst) + $(incl "$out" job_apply)))
    V=$(($(incl "$out" viewers_keep_msgs) + $(incl "$out" viewers_keep_msg)))
    NS=$(field "$TMP/line.$1" step) NC=$(field "$TMP/line.$1" coll) NB=$(field "$TMP/line.$1" beat)
    D=$(field "$TMP/line.$1" digest)
    if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$out" "$KEEP/callgrind.$1.out"; fi
}

printf 'bench-model: Ir per message (callgrind) after decoding, warmup %s steps, %s measured, %s bucket(s)\n' \
    "$WARMUP" "$STEPS" "$BUCKETS"
printf '%6s %8s %8s %8s %8s  %s\n' ranks path model viewers check digest
first=
for n in $ROWS; do
    run "$n" "$n" "$BUCKETS"
    all=$((NS + NC + NB))
    printf '%6s %8s %8s %8s %8s  %s\n' "$n" "$(per "$P" $all)" "$(per "$M" $all)" "$(per "$V" $all)" \
        "$(per $((P - M - V)) $all)" "$D"
    [ -z "$first" ] && first=$n P1=$P M1=$M V1=$V NS1=$NS NC1=$NC
done
run colls "$first" $((BUCKETS + 1))
dc=$((NC - NC1))
printf '%s ranks by kind (a coll: the difference one bucket more makes; a step: the rest, beats in it)\n' "$first"
printf '%6s %8s %8s %8s %8s\n' kind path model viewers check
# the coll's Ir (path model viewers), then the step's: the first run less its colls
c=$(awk -v dc=$dc -v a=$((P - P1)) -v b=$((M - M1)) -v v=$((V - V1)) 'BEGIN { printf "%.0f %.0f %.0f", a / dc, b / dc, v / dc }')
read -r cP cM cV <<<"$c"
s=$(awk -v n=$NS1 -v nc=$NC1 -v dc=$dc -v p=$P1 -v m=$M1 -v v=$V1 -v a=$((P - P1)) -v b=$((M - M1)) -v w=$((V - V1)) \
    'BEGIN { printf "%.0f %.0f %.0f", (p - a / dc * nc) / n, (m - b / dc * nc) / n, (v - w / dc * nc) / n }')
read -r sP sM sV <<<"$s"
printf '%6s %8s %8s %8s %8s\n' step "$sP" "$sM" "$sV" $((sP - sM - sV))
printf '%6s %8s %8s %8s %8s\n' coll "$cP" "$cM" "$cV" $((cP - cM - cV))
