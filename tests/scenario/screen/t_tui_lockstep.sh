# A class must not see drift that is not there: a default 4-rank run (its
# ranks in DDP lockstep, their telemetry in 50 ms bursts) sampled many times
# on the screen never shows two healthy ranks more than one step apart, in
# different epochs other than across an epoch's last step, nor the sampler
# strip with fewer than all 4 ranks. A capture can catch tmux between two
# frames (rows of the new one above rows of the old, a frame apart), so a
# screen counts as drift only when the next one, 0.2 s later, shows it too:
# the drift this guards against was on 53 of 60 screens.
. tests/lib.sh
. tests/lib_tui.sh
start_feed 120 50 "DDPTOP_WORKER=$PWD/$BUILD/ddptop-worker" -n 4 -- --dataset synthetic --epochs 1000 --batch-size 16
wait_for 60 hasE '^.? +3 +[^ ]+ +[0-9]+ train +[0-9]+ +[1-9][0-9]* ' || dies "the ranks never trained"
for i in $(seq 60); do
    screen >"$TMP/s.$i"
    sleep 0.2
done
"$PY" - "$TMP" <<'PYEOF' || die "the screen showed drift that is not there"
import glob, re, sys
row = re.compile(r'^.?\s+([0-3])\s+\S+\s+\d+\s+train\s+(\d+)\s+(\d+)\s')
bad, seen, prev = [], 0, None
for f in sorted(glob.glob(sys.argv[1] + "/s.*"), key=lambda p: int(p.rsplit(".", 1)[1])):
    text = open(f).read()
    ranks, drift = {}, []
    for line in text.splitlines():
        m = row.match(line)
        if m: ranks[int(m.group(1))] = (int(m.group(2)), int(m.group(3)))
    if len(ranks) < 4:
        prev = None
        continue
    seen += 1
    steps = [s for _, s in ranks.values()]
    if max(steps) - min(steps) > 1: drift.append("steps %s" % ranks)
    if len({e for e, _ in ranks.values()}) > 1 and max(steps) == min(steps): drift.append("epochs %s" % ranks)
    m = re.search(r'(\d+)/4 ranks  shuffle', text)
    if m and m.group(1) != "4": drift.append("sampler %s/4 ranks" % m.group(1))
    if drift and prev: bad.extend(prev + drift)
    prev = drift
print("%d screens with 4 training ranks, %d showing drift" % (seen, len(bad)))
for b in bad[:5]: print(b)
sys.exit(1 if bad or seen < 20 else 0)
PYEOF
keys d
wait_for 60 has "press q to leave" || dies "the clean stop did not finish"
keys q
left_with 0
