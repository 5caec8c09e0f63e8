# `ddptop run DIR` and `ddptop run APP.zip`, as `python DIR` runs them: the
# directory's (or the zip's) __main__.py under the adapter, sys.path[0] the
# directory itself (so its modules import), the job clean on 2 ranks; a
# directory without __main__.py is one line and exit 2, nothing started.
. tests/lib.sh
. tests/lib_py.sh
mkdir -p "$TMP/app"
cat >"$TMP/app/helper.py" <<'PYEOF'
WHERE = "helper of app"
PYEOF
cat >"$TMP/app/__main__.py" <<'PYEOF'
import os, sys
import torch, torch.distributed as dist
import helper                       # a module of the directory, as python DIR finds it
dist.init_process_group("gloo")
t = torch.ones(3)
dist.all_reduce(t)
print(f"rank {dist.get_rank()} path0 {sys.path[0]} {helper.WHERE} sum {t[0].item():g}", flush=True)
dist.destroy_process_group()
PYEOF
(cd "$TMP/app" && "$PY" -c 'import zipfile; z = zipfile.ZipFile("../app.zip", "w"); [z.write(f) for f in ("__main__.py", "helper.py")]')
for target in "$TMP/app" "$TMP/app.zip"; do
    timeout 120 "$DDPTOP" run -n 2 --python "$PY" --headless --log-dir "$TMP/logs" "$target" >"$TMP/out" 2>&1 ||
        { cat "$TMP/out" "$TMP"/logs/*; die "ddptop run $target failed"; }
    grep -q "job done: all 2 ranks ended cleanly" "$TMP/out" || { cat "$TMP/out"; die "$target: no clean verdict"; }
    for r in 0 1; do
        grep -qx "rank $r path0 $target helper of app sum 2" "$TMP/logs/rank-$r.log" ||
            { cat "$TMP/logs/rank-$r.log"; die "$target: rank $r did not run with sys.path[0] = $target"; }
    done
    echo "ok: $target"
done
mkdir -p "$TMP/empty"
"$DDPTOP" run -n 2 --python "$PY" --headless "$TMP/empty" >"$TMP/err" 2>&1
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "a directory without __main__.py" "$TMP/err" ||
    { cat "$TMP/err"; die "a directory without __main__.py: exit $rc"; }
wait_for 10 no_ranks || die "ranks left: $(our_ranks)"
echo "a directory and a zip run as python runs them"
