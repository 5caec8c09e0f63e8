# tests/scenario/python/diag/lib_diag.sh — the diagnosis tests' run and check
# (sourced after tests/lib.sh and tests/lib_py.sh): a case of diag_cases.py
# (or another script) under `ddptop run -n 2 --headless --json --hang-after 3
# --timeout 10`, and the final verdict's cause, rank and line checked.
DIAG_PY=$PWD/tests/scenario/python/diag/diag_cases.py
# diag_run NAME [SCRIPT [ARGS]]: $TMP/NAME/{out.jsonl,err,logs/,rc}; the
# script defaults to diag_cases.py NAME. DIAG_HANG_AFTER: --hang-after
# (default 3; a finished rank's process that has not exited by then is
# ended by the ladder, so a test comparing endings bare and under ddptop
# gives a loaded machine's slow interpreter exit more).
diag_run() {
    local name=$1; shift
    [ $# -gt 0 ] || set -- "$DIAG_PY" "$name"
    local d=$TMP/$name
    mkdir -p "$d"
    (cd "$d" && timeout 170 env DDPTOP_WORKER="$PY_WORKER" "$DDPTOP" run -n 2 --headless --json --hang-after "${DIAG_HANG_AFTER:-3}" \
        --timeout 10 --stop-grace 2 --log-dir "$d/logs" -- "$@" >"$d/out.jsonl" 2>"$d/err")
    echo $? >"$d/rc"
    wait_for 10 no_ranks || die "$name: ranks left running: $(our_ranks)"
}
# diag_line CASE [FILE]: the line number of the `# BUG CASE` mark.
diag_line() { grep -n "# BUG $1\b" "${2:-$DIAG_PY}" | cut -d: -f1; }
# diag_check NAME KIND RANK LINE: the job failed (exit 1); its summary's
# cause is KIND on RANK at LINE ("file.py:N in fn"; a prefix when it ends
# with ':'); the verdict starts with the cause (a stopped rank's in the past
# tense: "rank R stalled at step S at LINE", a silent one's "rank R went
# silent after step S (...), last heard at LINE") and says any other rank's end
# as a consequence or ddptop's stop; a live hang record, when there is one,
# named the same cause.
diag_check() {
    local d=$TMP/$1
    [ "$(cat "$d/rc")" = 1 ] || { tail -3 "$d/out.jsonl"; cat "$d/err"; die "$1: ddptop exited $(cat "$d/rc"), not 1"; }
    "$PY" - "$d/out.jsonl" "$2" "$3" "$4" <<'PYEOF' || { grep -E '"k":"(hang|summary)"' "$d/out.jsonl"; die "$1: wrong diagnosis"; }
import json, sys
path, kind, rank, line = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
recs = [json.loads(l) for l in open(path) if l.startswith("{")]
summ = [r for r in recs if r["k"] == "summary"][-1]
c, v = summ["cause"], summ["verdict"]
print(v)
assert c and c["kind"] == kind and c["rank"] == rank, c
assert (c["line"].startswith(line) if line.endswith(":") else c["line"] == line), (c["line"], line)
if kind == "stopped":
    assert v.startswith(f"job failed: rank {rank} stalled at step ") and f" at {c['line']} (" in v, v
elif kind == "silent":  # its line is where it was last heard, in the past tense
    assert v.startswith(f"job failed: rank {rank} went silent after step ") and f", last heard at {c['line']}" in v, v
else:
    assert v.startswith("job failed: " + c["text"]), v
assert c["line"] in v, v
# every other rank's end: a consequence, or ddptop's ladder
for part in v[len("job failed: "):].split("; ")[1:]:
    if part.startswith("rank") and " ended: " in part:
        assert "(a consequence)" in part or part.endswith("exit 1") and f"rank {rank} " in part, part
for h in (r for r in recs if r["k"] == "hang"):
    hc = h["cause"]
    assert (hc["kind"], hc["rank"], hc["line"]) == (c["kind"], c["rank"], c["line"]), (hc, c)
PYEOF
}

# ---- the same script bare and under ddptop (ddptop never changes how a script fails) ----
# diag_how STATUS: how a rank ended, "exit N" or "signal N", from a shell's status.
diag_how() { if [ "$1" -gt 128 ]; then echo "signal $(($1 - 128))"; else echo "exit $1"; fi; }
# diag_exception LOG: the exception a rank's log ends with: from the last
# line that starts one (a Python exception, or C++'s terminate) to the end,
# the adapter's own lines and the traceback's frames left out, addresses and
# ports masked; a rank waiting on a peer that aborts ends with Gloo's
# "Connection closed by peer" or its timeout, whichever comes first: a race
# bare torch runs too (seen both ways bare on one machine), so the two are
# one outcome here. torch 2.x prefixes a bare rank's uncaught exception
# with "[rankN]: " (its own excepthook); it is kept, since the adapter prints
# an uncaught exception through the same excepthook.
diag_exception() {
    grep -v '^ddptop-py ' "$1" | awk '
        /^(\[rank[0-9]+\]: )?[A-Za-z_][A-Za-z0-9_.]*(Error|Exception|Interrupt): / || /^terminate called/ { buf = ""; on = 1 }
        on { buf = buf $0 "\n" }
        END { printf "%s", buf }' | sed -E 's/\[[0-9.]+\]:[0-9]+/[ADDR]/g' |
        sed -E 's/^(\[rank[0-9]+\]: )?RuntimeError: \[[^]]*\] (Connection (closed|reset) by peer.*|Read error \[ADDR\]: Connection reset by peer|Timed out waiting [0-9]+ms for recv operation to complete)$/\1RuntimeError: (Gloo: the peer went away, or the wait timed out first)/'
}
# diag_bare NAME SCRIPT [ARGS]: 2 ranks of the script started with
# torchrun's environment by hand: $TMP/NAME/rank-R.{log,how}.
diag_bare() {
    local d=$TMP/$1 port r pids=()
    shift
    mkdir -p "$d"
    port=$(free_port 1)
    for r in 0 1; do
        RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 GROUP_RANK=0 ROLE_RANK=$r ROLE_WORLD_SIZE=2 \
            MASTER_ADDR=127.0.0.1 MASTER_PORT=$port OMP_NUM_THREADS=1 \
            timeout 120 "$PY" "$@" >"$d/rank-$r.log" 2>&1 &
        pids+=($!)
    done
    for r in 0 1; do wait "${pids[$r]}"; diag_how $? >"$d/rank-$r.how"; done
}
# diag_ends NAME: a run under ddptop (--json, logs in $TMP/NAME/logs) as
# diag_bare leaves one: $TMP/NAME/rank-R.log and rank-R.how (ddptop's
# word for how the rank ended: "exit 1", "signal 6").
diag_ends() {
    local d=$TMP/$1 r
    for r in 0 1; do
        cp "$d/logs/rank-$r.log" "$d/rank-$r.log" 2>/dev/null || { cat "$d/out.jsonl"; die "$1: no log of rank $r"; }
        grep -o "\"r\":$r,\"state\":\"[a-z]*\",\"how\":\"[a-z]* [0-9]*" "$d/out.jsonl" | tail -1 |
            sed 's/.*"how":"//' >"$d/rank-$r.how"
    done
}
# diag_same BARE UNDER: every rank ended alike, with the same exception.
diag_same() {
    local r
    for r in 0 1; do
        [ "$(cat "$TMP/$1/rank-$r.how")" = "$(cat "$TMP/$2/rank-$r.how")" ] || {
            tail -n 5 "$TMP/$1/rank-$r.log" "$TMP/$2/rank-$r.log"; grep -E "\"k\":\"(summary|hang)\"" "$TMP/$2/out.jsonl" 2>/dev/null; cat "$TMP/$2/err" 2>/dev/null
            die "$2: rank $r ended \"$(cat "$TMP/$2/rank-$r.how")\" under ddptop, \"$(cat "$TMP/$1/rank-$r.how")\" bare"; }
        diag_exception "$TMP/$1/rank-$r.log" >"$TMP/$1/rank-$r.exc"
        diag_exception "$TMP/$2/rank-$r.log" >"$TMP/$2/rank-$r.exc"
        cmp -s "$TMP/$1/rank-$r.exc" "$TMP/$2/rank-$r.exc" || {
            diff "$TMP/$1/rank-$r.exc" "$TMP/$2/rank-$r.exc"
            die "$2: rank $r's exception under ddptop is not the bare one (< bare, > ddptop)"; }
    done
}
