# Every panel as a user sees it, from a scripted message stream (the feeder
# in place of the workers): rank rows with hosts and a slow rank flagged,
# the loss chart with an eval mark, all-reduce buckets and the straggler,
# the sampler strip with padding duplicates and the set_epoch warning, the
# events; a panel zoomed full-screen; a rank's detail page.
. tests/lib.sh
. tests/lib_tui.sh
cat >"$TMP/s.feed" <<'FEED'
set beat=0.5 sync=10
0    *  hello host=node{r} max_steps=3000 steps_per_epoch=50 dataset_size=202 batch=32
0    *  phase phase=init
0.1  *  phase phase=rendezvous
0.2  *  phase phase=broadcast
0.3  *  phase phase=train
0.3  *  shard epoch=0 size=202 seed=7
0.3  *  train from=1 to=3000 rate=40 loss0=2.3 loss1=0.2 epoch_steps=50 buckets=2 bucket_bytes=1048576,65536 late=2:30 slow=3:2.5
0.6  1  log level=warn text="rank one is warming up"
0.8  0  eval epoch=0 step=30 accuracy=0.712 loss=0.9
1.2  *  shard epoch=1 size=202 seed=7 repeat_epoch=0
FEED
start_feed 120 40 "" -n 4 -- --script "$TMP/s.feed"
wait_for 15 has "repeats the previous epoch" || dies "no set_epoch warning"
wait_for 5 has "71.2%" || dies "no eval mark on the loss chart"
wait_for 5 has "epoch 1  N 202  4/4 ranks" || dies "not every rank's epoch 1 shard in the sampler"
screen >"$TMP/s1"
cat "$TMP/s1"
g() { grep -Eq -- "$1" "$TMP/s1" || { cat "$TMP/s1"; die "$2"; }; }
# header and ranks
g ' RUNNING .*4/4 ranks' "title: state and ranks"
g 'world 4 on 4 nodes' "header: world and nodes"
for r in 0 1 2 3; do g "^. +$r node$r +[0-9]+ +train " "no row for rank $r"; done
g "^! +3 node3 .* 25\.0 .*slow 2\.5x median" "slow rank 3 not flagged"
# loss chart: title with the legend, axes, eval mark with its accuracy
g '3 loss  linear r0. r1. r2. r3.' "loss legend"
g '▼71\.2%' "eval accuracy mark"
g '^ +step 1 ' "x axis"
# all-reduce: share, both buckets, rank 2 arrives last by 30 ms; everyone
# leaves 1 ms after it came (the feeder's comm of 2 ms over 2 buckets): the
# transfer is that 1 ms, the 30 ms before it the wait, and the bandwidths
# are of the transfer (1 MiB / 1 ms), not a mean over ranks with the waiting in
g 'hidden behind backward [0-9]+%' "comm share"
grep -q 'backward -' "$TMP/s1" && die "a negative share hidden behind backward"
g '^b0 +1\.05MB xfer +1\.00 ms wait +30\.00 ms  algbw +1\.05 busbw +1\.57 GB/s' "bucket 0: transfer, wait, bandwidths"
g '^b1 +65\.5kB xfer +1\.00 ms wait +30\.00 ms  algbw +0\.07 busbw +0\.10 GB/s' "bucket 1: transfer, wait, bandwidths"
g 'allreduce b0  step [0-9]+ +xfer +1\.00 ms  algbw 1\.05 busbw 1\.57 GB/s  last in r2 \+30\.00 ms \(wait 30\.00 ms\)' "straggler rank 2"
# sampler: epoch 1 padded by 2, the duplicates marked, each rank's shard
g 'epoch 1  N 202  4/4 ranks  shuffle seed 7  51/rank  total 204  padding 2' "sampler summary"
g 'rank [0-3]: epoch 1 repeats the previous epoch.s order: sampler.set_epoch\(epoch\) not called\?' "set_epoch warning"
g '▚' "padding duplicates not marked in the strip"
g '^r0 +51 samples \(epoch 1\)  first( [0-9]+){10}' "rank 0's shard"
# events: a rank's log line, the warning, phase changes
g 'r1 rank one is warming up' "log line in events"
g 'r[0-3] rank [0-3]: broadcast -> train' "phase change in events"
# 5: the sampler alone, every rank listed
keys 5
wait_for 5 has "^r3 .*51 samples" || dies "zoomed sampler does not list rank 3"
has "2 ranks" && dies "ranks panel still shown while the sampler is zoomed"
keys 5
wait_for 5 has "2 ranks" || dies "5 again did not bring the panels back"
# Enter: rank 0's detail
keys Enter
wait_for 5 has "rank 0  Esc closes" || dies "no detail page"
screen >"$TMP/s2"
grep -Eq 'host node0  pid [0-9]+  cpu  gloo  state alive  phase train for' "$TMP/s2" || { cat "$TMP/s2"; die "detail identity"; }
grep -Eq 'phases: init .* > rendezvous .* > broadcast .* > train .*\(now\)' "$TMP/s2" || { cat "$TMP/s2"; die "detail phases"; }
grep -Eq 'SEQ OP +BKT +STEP +BYTES +TOOK_MS +WAIT_MS +XFER_MS +ALGBW +BUSBW +QUEUED_MS' "$TMP/s2" || { cat "$TMP/s2"; die "detail collectives"; }
grep -Eq '^ +[0-9]+ allreduce +[01] ' "$TMP/s2" || { cat "$TMP/s2"; die "no collective rows"; }
grep -Eq 'shard: epoch 1  51 samples \(total 204, padding 2\)' "$TMP/s2" || { cat "$TMP/s2"; die "detail shard"; }
keys Escape
wait_for 5 has "3 loss" || dies "Esc did not close the detail"
keys d
wait_for 15 has "job done" || dies "d did not end the job"
keys q
left_with 0
grep -q "rank 3: exit 0" "$TMP/after.txt" || { cat "$TMP/after.txt"; die "no summary"; }
echo "panels ok"
