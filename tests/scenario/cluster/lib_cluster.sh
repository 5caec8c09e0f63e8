# tests/scenario/cluster/lib_cluster.sh — two ddptops on 127.0.0.1 as node 0
# and node 1's agent, one rank each (sourced after tests/lib.sh).
# node0 PORT KEYS OUT ARGS... / node1 PORT KEYS OUT ARGS...: start it in the
# background, output to OUT, ARGS as `ddptop run` takes them (ddptop's
# options, then `--` and the trainer's); $! is its pid.
node0() {
    local p=$1 k=$2 o=$3
    shift 3
    "$DDPTOP" run --headless -n 1 --nnodes 2 --node-rank 0 --rdzv 127.0.0.1:$p --keys "$k" "$@" >"$o" 2>&1 &
}
node1() {
    local p=$1 k=$2 o=$3
    shift 3
    "$DDPTOP" run -n 1 --nnodes 2 --node-rank 1 --rdzv 127.0.0.1:$p --keys "$k" "$@" >"$o" 2>&1 &
}
# kept OUT...: the rank-log directories a failed node kept and named.
kept() { sed -n "s/.*ddptop: the ranks' logs are kept in \(.*\)/\1/p" "$@"; }
