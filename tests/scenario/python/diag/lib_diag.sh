# tests/scenario/python/diag/lib_diag.sh — the diagnosis tests' run and check
# (sourced after tests/lib.sh and tests/lib_py.sh): a case of diag_cases.py
# (or another script) under `ddptop run -n 2 --headless --json --hang-after 3
# --timeout 10`, and the final verdict's cause, rank and line checked.
DIAG_PY=$PWD/tests/scenario/python/diag/diag_cases.py
# diag_run NAME [SCRIPT [ARGS]]: $TMP/NAME/{out.jsonl,err,logs/,rc}; the
# script defaults to diag_cases.py NAME.
diag_run() {
    local name=$1; shift
    [ $# -gt 0 ] || set -- "$DIAG_PY" "$name"
    local d=$TMP/$name
    mkdir -p "$d"
    (cd "$d" && timeout 170 env DDPTOP_WORKER="$PY_WORKER" "$DDPTOP" run -n 2 --headless --json --hang-after 3 \
        --timeout 10 --stop-grace 2 --log-dir "$d/logs" -- "$@" >"$d/out.jsonl" 2>"$d/err")
    echo $? >"$d/rc"
    wait_for 10 no_ranks || die "$name: ranks left running: $(our_ranks)"
}
# diag_line CASE [FILE]: the line number of the `# BUG CASE` mark.
diag_line() { grep -n "# BUG $1\b" "${2:-$DIAG_PY}" | cut -d: -f1; }
# diag_check NAME KIND RANK LINE: the job failed (exit 1); its summary's
# cause is KIND on RANK at LINE ("file.py:N in fn"; a prefix when it ends
# with ':'); the verdict starts with the cause (a stopped rank's in the past
# tense: "rank R stalled at step S at LINE") and says any other rank's end
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
