# A job of 256 ranks stays usable on a 120x40 screen: min/median/max rows,
# the outliers named (a silent rank, a slow one), the list scrolls to the
# last rank, and sorting by health puts the odd ranks first.
. tests/lib.sh
. tests/lib_tui.sh
cat >"$TMP/n.feed" <<'FEED'
set beat=1 sync=1
0    *   hello host=node{r} max_steps=90000 steps_per_epoch=100 dataset_size=25600
0.2  *   phase phase=train
0.2  *   shard epoch=0 size=25600
0.3  *   train from=1 to=90000 rate=2 slow=17:4
1.0  200 silence
FEED
start_feed 120 40 "" -n 256 -- --script "$TMP/n.feed"
wait_for 40 has " 256/256 ranks" || dies "not every rank said hello"
# rank 200 has been silent for 5 s: stale
wait_for 20 has "outliers: r200 silent" || dies "silent rank 200 not named first among the outliers"
wait_for 5 has "r17 step 40.0 ms (4.0x median)" || dies "slow rank 17 not named"
screen >"$TMP/s"
cat "$TMP/s"
g() { grep -Eq -- "$1" "$TMP/s" || { cat "$TMP/s"; die "$2"; }; }
g '^. +min +[0-9]+ +[0-9.]+ +10\.0 ' "no min row"
g '^. +med +256 ranks ' "no median row"
g '^. +max .* 40\.0 .*step_ms r17' "no max row naming rank 17"
g ' 1-[0-9]+ of 256 ' "no list position"
g 'colour = rank mod 8' "sampler legend for many ranks"
g 'waiting [0-9.]+s for r200' "the all-reduce panel does not say who everyone waits for"
# End: the last rank is listed
keys End
wait_for 5 hasE "^▶ +255 node255 " || dies "End did not select rank 255"
has " of 256 " || dies "no list position after End"
# s x6: sorted by health, the silent rank first, then the slow one
keys s s s s s s
wait_for 5 has "sorted by health" || dies "not sorted by health"
wait_for 5 bash -c "tmux -L '$TS' capture-pane -p -t '$TS' | grep -E '^. +[0-9]+ node' | head -2 | tr '\n' ' ' | grep -Eq '^. +200 node200 .*STALE.* +17 node17 '" ||
    dies "health order does not start with ranks 200 and 17"
# d: every rank stops; rank 200 ends without a bye (it sends nothing): failed
keys d
wait_for 40 has "job failed" || dies "job did not end"
keys q
left_with 1
echo "many ok"
