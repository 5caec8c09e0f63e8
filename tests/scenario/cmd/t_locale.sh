# A locale whose decimal separator is a comma (de_DE.UTF-8): ddptop keeps
# the user's characters but never writes or reads numbers with a comma.
# --json lines stay JSON ("t":0,219 was not), export's CSV keeps six columns
# a row (1,18 split the loss in two), and "--hang-after 0.5" is a number.
# The locale is built into $TMP with localedef (skip where it cannot be).
. tests/lib.sh
command -v localedef >/dev/null || skip "no localedef"
mkdir -p "$TMP/loc"
localedef -i de_DE -f UTF-8 "$TMP/loc/de_DE.UTF-8" >/dev/null 2>&1 || skip "localedef cannot build de_DE.UTF-8 here"
export LOCPATH=$TMP/loc
[ "$(LC_ALL=de_DE.UTF-8 "$PY" -c 'import locale; locale.setlocale(locale.LC_ALL, ""); print(locale.localeconv()["decimal_point"])')" = "," ] \
    || skip "de_DE.UTF-8 built, but its decimal point is not a comma"
case $BUILD in /*) FEED=$BUILD/tests/tool_feed;; *) FEED=$PWD/$BUILD/tests/tool_feed;; esac
cat >"$TMP/j.feed" <<'FEED'
set beat=0.5
0    *  hello max_steps=40 dataset_size=64
0.1  *  phase phase=train
0.1  *  train from=1 to=40 rate=100
0.6  *  exit
FEED
LC_ALL=de_DE.UTF-8 DDPTOP_WORKER=$FEED timeout 60 "$DDPTOP" run --headless --json --hang-after 0.5 -n 2 \
    --record "$TMP/j.rec" -- --script "$TMP/j.feed" >"$TMP/j.jsonl" 2>"$TMP/err" \
    || die "the run under de_DE.UTF-8: exit $?: $(cat "$TMP/err")"
"$PY" - "$TMP/j.jsonl" <<'PYEOF' || die "--json under de_DE.UTF-8 is not JSON lines"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
objs = [json.loads(l) for l in lines]
assert objs and all(isinstance(o["t"], (int, float)) for o in objs if "t" in o), lines[:3]
assert objs[-1]["k"] == "summary", objs[-1]
print("ok:", len(objs), "JSON lines")
PYEOF
LC_ALL=de_DE.UTF-8 "$DDPTOP" export "$TMP/j.rec" --csv "$TMP/j.csv" 2>"$TMP/err" || die "export: exit $?: $(cat "$TMP/err")"
awk -F, 'NR > 1 && NF != 6 { bad++ } END { exit !(NR > 1 && !bad) }' "$TMP/j.csv" \
    || die "export's CSV under de_DE.UTF-8: $(sed -n 2,3p "$TMP/j.csv")"
echo "ok: export CSV, $(($(wc -l <"$TMP/j.csv") - 1)) rows of six columns"
no_workers || die "workers left running"
