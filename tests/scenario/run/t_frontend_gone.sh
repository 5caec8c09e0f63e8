# kill -9 of ddptop: the workers notice (their parent-death signal, then
# getppid), agree on a stop at one step, rank 0 writes the final
# checkpoint as a clean stop would, and none is left running. The
# checkpoint is complete: a new run resumes from it.
. tests/lib.sh
out=$TMP/out.txt
args=(--dataset synthetic --model mlp:16,32,4 --batch-size 8 --ckpt-dir "$TMP/ck")
"$DDPTOP" run -n 2 --headless -- "${args[@]}" --epochs 100000 >"$out" 2>&1 &
dp=$!
CLEANUPS+=("kill -9 $dp")
wait_for 30 grep -q "step [1-9]" "$out" || { cat "$out"; die "job never trained"; }
logs=$(sed -n 's/.*logs in \([^)]*\)).*/\1/p' "$out" | head -1)
[ -d "$logs" ] || die "no log directory in: $(head -3 "$out")"
kill -9 $dp
wait $dp 2>/dev/null
wait_for 20 no_workers || die "workers left running after kill -9 of ddptop: $(our_workers)"
grep -q "ddptop (pid $dp) is gone" "$logs"/rank-*.log || { cat "$logs"/rank-*.log; die "no rank said ddptop is gone"; }
grep -q "with a final checkpoint; exit 1" "$logs/rank-0.log" || { cat "$logs"/rank-*.log; die "no final checkpoint line"; }
[ -f "$TMP/ck/latest/model.safetensors" ] || { ls -la "$TMP/ck"; die "no final checkpoint in $TMP/ck"; }
saved=$(readlink "$TMP/ck/latest")
"$DDPTOP" run -n 2 --headless -- "${args[@]}" --epochs 1 --resume "$TMP/ck/latest" >"$TMP/resume.txt" 2>&1 ||
    { tail "$TMP/resume.txt"; die "resume from the final checkpoint failed"; }
grep -q "resuming from .*${saved##*/}" "$TMP/resume.txt" || { tail "$TMP/resume.txt"; die "did not resume from $saved"; }
rm -rf "$logs"
