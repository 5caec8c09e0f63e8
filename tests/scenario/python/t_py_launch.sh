# ddptop run's torchrun forms, as a user types them: a missing script or a
# bad flag is one line and exit 2 before anything starts; `--no-python CMD`
# runs any executable with torchrun's environment on every rank (and its
# own arguments); `-m MODULE` runs a module under the adapter, which finds
# ddptop and speaks for it (hello, phases) while the user's PYTHONPATH
# still holds.
. tests/lib.sh
"$PY" -c 'import torch' 2>/dev/null || skip "no torch for $PY"

# one line, exit 2, nothing started
one_line_2() {
    local what=$1 want=$2; shift 2
    "$@" >"$TMP/err" 2>&1
    local rc=$?
    [ $rc -eq 2 ] || { cat "$TMP/err"; die "$what: exit $rc, not 2"; }
    [ "$(wc -l <"$TMP/err")" -eq 1 ] || { cat "$TMP/err"; die "$what: not one line"; }
    grep -qF -- "$want" "$TMP/err" || { cat "$TMP/err"; die "$what: does not say \"$want\""; }
}
one_line_2 "missing script" "ddptop: $TMP/nope.py: no such script" \
    "$DDPTOP" run -n 2 --python "$PY" --headless "$TMP/nope.py" --epochs 1
one_line_2 "missing module" "ddptop: -m no_such_mod: no such module" \
    "$DDPTOP" run -n 2 --python "$PY" --headless -m no_such_mod
one_line_2 "bad flag" 'unknown option "--nproc"' "$DDPTOP" run --nproc 2 examples/ddp_basics.py
one_line_2 "missing interpreter" "--python $TMP/py: not an executable file" \
    "$DDPTOP" run --python "$TMP/py" examples/ddp_basics.py
one_line_2 "missing command" "--no-python no-such-cmd-$$: not found on PATH" \
    "$DDPTOP" run --no-python no-such-cmd-$$
one_line_2 "script after --" "what follows \"--\" are the built-in trainer's options" \
    "$DDPTOP" run -n 2 -- examples/ddp_basics.py
[ -z "$(our_workers)" ] || die "a refused command line started workers"

# --no-python: a shell script; torchrun's variables, the same master and
# run id on every rank, a port nobody listens on, the script's arguments
cat >"$TMP/ranks.sh" <<'SH'
#!/bin/sh
echo "env RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE" \
     "GROUP_RANK=$GROUP_RANK ROLE_RANK=$ROLE_RANK ROLE_WORLD_SIZE=$ROLE_WORLD_SIZE" \
     "TORCHELASTIC_RESTART_COUNT=$TORCHELASTIC_RESTART_COUNT TORCHELASTIC_MAX_RESTARTS=$TORCHELASTIC_MAX_RESTARTS"
echo "master $MASTER_ADDR:$MASTER_PORT run $TORCHELASTIC_RUN_ID"
echo "pythonpath $PYTHONPATH"
echo "args $*"
SH
chmod +x "$TMP/ranks.sh"
out=$TMP/cmd.jsonl
"$DDPTOP" run -n 2 --headless --json --log-dir "$TMP/logs" --no-python "$TMP/ranks.sh" --lr 0.1 x >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$out" "$TMP"/logs/*; die "--no-python: exit $rc"; }
grep -q '"verdict":"job done: all 2 ranks ended cleanly"' "$out" || { cat "$out"; die "--no-python: no clean verdict"; }
for r in 0 1; do
    log=$TMP/logs/rank-$r.log
    grep -qx "env RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 GROUP_RANK=0 ROLE_RANK=$r ROLE_WORLD_SIZE=2 TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=0" "$log" \
        || { cat "$log"; die "rank $r: not torchrun's environment"; }
    grep -qx "args --lr 0.1 x" "$log" || { cat "$log"; die "rank $r: not the command's own arguments"; }
    grep -q "^pythonpath $PWD/workers/python" "$log" || { cat "$log"; die "rank $r: the adapter is not first on PYTHONPATH"; }
    grep -q "\"r\":$r,\"state\":\"exited\",\"how\":\"exit 0\"" "$out" || die "rank $r: not exit 0"
done
m0=$(grep '^master' "$TMP/logs/rank-0.log") m1=$(grep '^master' "$TMP/logs/rank-1.log")
[ "$m0" = "$m1" ] || die "the ranks disagree: $m0 / $m1"
case $m0 in "master 127.0.0.1:"[0-9]*" run ddptop-"[0-9]*) ;; *) die "master or run id: $m0";; esac
port=${m0#master 127.0.0.1:} port=${port%% *}
[ "$port" != 29500 ] || die "MASTER_PORT is torchrun's default, not a free port"

# -m MODULE under the adapter, found through the user's own PYTHONPATH
mkdir -p "$TMP/mods/minipkg"
: >"$TMP/mods/minipkg/__init__.py"
cat >"$TMP/mods/minipkg/allsum.py" <<'PYEOF'
import os, sys
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(f"rank {dist.get_rank()} sum {t.item():g} args {' '.join(sys.argv[1:])}", flush=True)
dist.destroy_process_group()
PYEOF
out=$TMP/mod.jsonl
PYTHONPATH=$TMP/mods "$DDPTOP" run -n 2 --python "$PY" --headless --json --log-dir "$TMP/mlogs" \
    -m minipkg.allsum --k v >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$out" "$TMP"/mlogs/*; die "-m: exit $rc"; }
grep -q '"verdict":"job done: all 2 ranks ended cleanly"' "$out" || { cat "$out"; die "-m: no clean verdict"; }
for r in 0 1; do
    grep -qx "rank $r sum 3 args --k v" "$TMP/mlogs/rank-$r.log" || { cat "$TMP/mlogs/rank-$r.log"; die "-m: rank $r"; }
    grep -q "\"text\":\"rank $r hello pid [0-9]* on .* (cpu, gloo)\"" "$out" || { cat "$out"; die "-m: no hello from rank $r"; }
    grep -q "\"r\":$r,\"state\":\"exited\",\"how\":\"exit 0\",.*\"phase\":\"destroyed\"" "$out" \
        || { cat "$out"; die "-m: rank $r did not end destroyed"; }
done
echo "PASS: ddptop run's forms: refused lines, --no-python CMD, -m MODULE"
