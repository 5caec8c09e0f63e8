# Torch scripts that go wrong, under `ddptop run` with the torch adapter:
# a forgotten sampler.set_epoch is said (by the adapter and by ddptop); a
# script that raises ends the job failed, its traceback in the events; and
# the teaching faults, given before the script (`--fault SPEC`) or in
# DDPTOP_FAULTS: bad specs are one line and exit 2 before anything starts,
# kill:1@3 ends rank 1 by SIGKILL after step 3, stall:1@5 leaves rank 0
# waiting in an all-reduce for rank 1 (the hang names both, rank 1's beats
# say which line of the script it is on), unsafe-stop@5 is the classic
# shutdown hang (rank 0 in its barrier, rank 1 in an all-reduce). Nothing
# is left running.
. tests/lib.sh
. tests/scenario/python/lib_py.sh
basics="examples/ddp_basics.py --data synthetic --limit 1024 --epochs 1000 --out $TMP/model.pt"

out=$TMP/epoch.jsonl
py_run -n 2 --headless --json -- examples/ddp_forgot_set_epoch.py >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$out"; die "forgot_set_epoch: ddptop exited $rc"; }
grep -q 'DistributedSampler iterated again at epoch 0 without set_epoch(1)' "$out" || { cat "$out"; die "no adapter warning"; }
grep -q '"level":"warn".*epoch 1 has the same sample order as epoch 0: sampler.set_epoch(epoch) not called?' "$out" \
    || { cat "$out"; die "ddptop did not see the repeated order"; }

out=$TMP/crash.jsonl
py_run -n 2 --headless --json -- examples/ddp_basics.py --data synthetic --limit 512 \
    --crash-at-step 3 --out "$TMP/model.pt" >"$out" 2>&1
rc=$?
[ $rc -ne 0 ] || { cat "$out"; die "a crashing script: ddptop exited 0"; }
for r in 0 1; do
    grep -q "\"r\":$r,\"level\":\"error\",\"text\":\"rank $r: destroyed -> error: RuntimeError: crash asked for at step 3\"" \
        "$out" || { cat "$out"; die "rank $r: no error phase"; }
    grep -q "\"r\":$r,\"level\":\"error\",\"text\":\"examples/ddp_basics.py:[0-9]* in main: raise RuntimeError(f" "$out" \
        || { cat "$out"; die "rank $r: the traceback's frame is not in the events"; }
done
grep -q '"ok":false' "$out" || die "summary says ok"

for spec in kill:x@3 slow:1:0ms unsafe-stop@ frobnicate kill:5@3; do
    py_run -n 2 --headless --device cpu -- --fault "$spec" $basics >"$TMP/out" 2>"$TMP/err"
    rc=$?
    [ $rc -eq 2 ] || die "--fault $spec: exit $rc, want 2"
    [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q -- "--fault" "$TMP/err" || { cat "$TMP/err"; die "--fault $spec: not one line naming --fault"; }
done
DDPTOP_FAULTS="slow:1:5ms stall:1" py_run -n 2 --headless --device cpu -- $basics >"$TMP/out" 2>"$TMP/err"
[ $? -eq 2 ] && grep -q 'cannot read "stall:1"' "$TMP/err" || { cat "$TMP/err"; die "DDPTOP_FAULTS: a bad spec was not refused"; }

out=$TMP/kill.txt
py_run -n 2 --headless -- --fault kill:1@3 $basics >"$out" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$out"; die "kill:1@3: ddptop exited $rc, want 1"; }
grep -q "rank 1: signal 9 (Killed), step 3" "$out" || { cat "$out"; die "rank 1's end is not signal 9 at step 3"; }
grep -q "r1 warning: fault: rank 1 kills itself at step 3" "$out" || { cat "$out"; die "no fault sentence"; }

out=$TMP/stall.jsonl
DDPTOP_FAULTS=stall:1@5 py_run -n 2 --headless --json --hang-after 1 --stop-grace 1 --timeout 6 --record $TMP/rec -- $basics >"$out" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$out"; die "stall:1@5: ddptop exited $rc, want 1"; }
grep -q '"r":1,"level":"warn","text":"fault: rank 1 stops stepping at step 5' "$out" || { cat "$out"; die "no stall sentence"; }
"$DDPTOP" export "$TMP/rec" --jsonl "$TMP/rec.jsonl" || die "export failed"
"$PY" - "$out" "$TMP/rec.jsonl" <<'PYEOF' || die "the stall's hang is not named"
import json, sys
out = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
h = [m for m in out if m["k"] == "hang"][0]
assert h["waiting"] == [0] and h["missing"] == [1] and h["op"] == "allreduce", h
assert "rank 1" in h["verdict"] and "after step 5" in h["verdict"], h["verdict"]
rec = [json.loads(l) for l in open(sys.argv[2])]
stalled = [m for m in rec if m.get("k") == "beat" and m.get("r") == 1 and m["step"] == 5]
assert len(stalled) >= 2 and all(m["where"].startswith("ddp_basics.py:") for m in stalled), stalled[-2:]
PYEOF

out=$TMP/unsafe.jsonl
DDPTOP_FAULTS=unsafe-stop@5 py_run -n 2 --headless --json --hang-after 1 --stop-grace 1 --timeout 6 -- $basics >"$out" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$out"; die "unsafe-stop@5: ddptop exited $rc, want 1"; }
grep -q '"r":0,"level":"warn","text":"fault: unsafe stop' "$out" || { cat "$out"; die "no unsafe-stop sentence"; }
"$PY" - "$out" <<'PYEOF' || { cat "$out"; die "the shutdown hang is not named"; }
import json, sys
h = [m for m in map(json.loads, (l for l in open(sys.argv[1]) if l.startswith("{"))) if m["k"] == "hang"][0]
# rank 0 in barrier #N, rank 1 in all-reduce #N: which one the hang view
# calls the waiter depends on whose beat came first
assert sorted(h["waiting"] + h["missing"]) == [0, 1] and h["op"] in ("allreduce", "barrier") and h["mismatch"], h
assert "after step 5" in h["verdict"], h["verdict"]
PYEOF
wait_for 10 no_ranks || die "ranks left running: $(our_ranks)"
echo "PASS: set_epoch warned; a crash fails the job with its traceback; kill, stall, unsafe-stop and bad specs"
