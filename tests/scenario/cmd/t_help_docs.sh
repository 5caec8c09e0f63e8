# The help and the README cannot drift from the parsers (issue 28, item 4):
# - `ddptop COMMAND --help` is that command's own help (its usage line first,
#   shorter than `ddptop --help`), names every option its parser compares
#   against, and every --option it names is known to a parser (ddptop's or,
#   for run, the built-in trainer's);
# - `ddptop run --trainer-help` prints what ddptop-worker --help prints, and
#   no help sends people to ddptop-worker (not on PATH);
# - every command line in README.md's and examples/README.md's code blocks
#   that starts with `ddptop` parses: run/listen lines under
#   DDPTOP_PARSE_ONLY (and their trainer options through the worker's own
#   check), sampler/export/replay for real against a recording made here
#   (replay with --headless), attach against an endpoint nobody serves (any
#   answer but a usage error);
# - every --flag README.md names is known to a parser (or, for the lesson
#   scripts' own flags, to the script's argparse).
. tests/lib.sh
case $BUILD in /*) W=$BUILD/ddptop-worker ;; *) W=$PWD/$BUILD/ddptop-worker ;; esac
GEN=$TMP/general
"$DDPTOP" --help >"$GEN" || die "ddptop --help: exit $?"

# known_run OPT: ddptop run's parser or the trainer's knows OPT.
known_run() {
    [ "$1" = --name ] && return 0 # "--name=value": torchrun's spelling, in words
    DDPTOP_PARSE_ONLY=1 timeout 20 "$DDPTOP" run "$1" </dev/null 2>&1 | grep -q 'unknown option' || return 0
    DDPTOP_CHECK_ARGS=1 timeout 20 "$W" "$1" </dev/null 2>&1 | grep -q 'unknown trainer option' && return 1
    return 0
}
# known_sub CMD OPT: CMD's parser knows OPT.
known_sub() {
    if [ "$1" = listen ]; then
        DDPTOP_PARSE_ONLY=1 timeout 20 "$DDPTOP" listen "ipc://$TMP/nobody" "$2" </dev/null 2>&1 | grep -q 'unknown option' && return 1
        return 0
    fi
    timeout 20 "$DDPTOP" "$1" "$2" </dev/null 2>&1 | grep -q 'unknown option' && return 1
    return 0
}
# src_opts FILE...: the options a parser compares its argument against.
src_opts() { grep -ho 'strcmp(a, "--[a-z][a-z-]*")' "$@" | sed 's/.*"\(--[a-z-]*\)".*/\1/'; }

for c in run sampler export replay listen attach stacks; do
    h=$TMP/help.$c
    "$DDPTOP" $c --help >"$h" 2>&1 || die "ddptop $c --help: exit $?: $(head -3 "$h")"
    case $c in run) want="usage: ddptop [run] ";; *) want="usage: ddptop $c ";; esac
    head -1 "$h" | grep -qF "$want" || die "ddptop $c --help does not start with \"$want\": $(head -1 "$h")"
    [ "$(wc -l <"$h")" -lt "$(wc -l <"$GEN")" ] || die "ddptop $c --help is as long as the general help"
    grep -q 'ddptop-worker --help' "$h" && die "ddptop $c --help sends people to ddptop-worker --help (not on PATH)"
    # what its parser compares against, in its help
    case $c in
    run) opts=$(src_opts tui/cmd/run.c; sed -n 's/^    {"\(-[-a-z]*\)", \(NULL\|"\(--[a-z-]*\)"\).*/\1 \3/p' tui/cmd/run.c) ;;
    sampler) opts=$(src_opts tui/cmd/sampler.c) ;;
    attach) opts=$(src_opts tui/attach/client.c) ;;
    replay) opts=$(src_opts tui/record/replay.c) ;;
    export) opts=$(grep 'out_flag\[OUT__COUNT\] =' tui/record/export_cli.c | grep -o '"--[a-z-]*"' | tr -d '"') ;;
    listen) opts="--keys" ;;
    stacks) opts="--json --keys --wait" ;; # attach/client.c's parser, less attach's own
    esac
    [ -n "$opts" ] || die "$c: no options found in its parser's source"
    for o in $opts; do
        [ "$o" = --help ] && continue # how the reader got here
        grep -qe "$o\b" "$h" || die "ddptop $c --help does not mention $o, which its parser takes"
    done
    # what its help names, known to its parser
    for o in $(grep -o -- '--[a-z][a-z0-9_-]*' "$h" | sort -u); do
        # (a help may name another command's option: export's "ddptop run --record FILE")
        known_run "$o" || { [ $c != run ] && known_sub $c "$o"; } || die "ddptop $c --help names $o, which no parser knows"
    done
    echo "ok: ddptop $c --help is its own ($(wc -l <"$h") lines) and names its options"
done
grep -q 'ddptop-worker --help' "$GEN" && die "ddptop --help sends people to ddptop-worker --help (not on PATH)"
grep -q 'ddptop run --trainer-help' "$GEN" || die "ddptop --help does not say where the trainer's options are"
"$DDPTOP" run --trainer-help >"$TMP/th" 2>&1 || die "ddptop run --trainer-help: exit $?"
"$W" --help >"$TMP/wh" 2>&1
cmp -s "$TMP/th" "$TMP/wh" || die "ddptop run --trainer-help differs from ddptop-worker --help"
grep -q -- '--pace N' "$TMP/th" || die "the trainer's help has no --pace"
echo "ok: ddptop run --trainer-help prints the trainer's $(grep -c '^  --' "$TMP/th") option lines"

# A recording for README's export and replay lines.
CWD=$TMP/cwd
PCWD=$TMP/parse # run lines parse here: README's --record job.rec must be a new file
mkdir -p "$CWD" "$PCWD"
ln -s "$PWD/examples" "$CWD/examples" # examples/README.md's replay lines
(cd "$CWD" && timeout 120 "$DDPTOP" run -n 2 --headless --record job.rec -- --dataset synthetic --model mlp:16,8,3 \
    --synthetic-size 64 --batch-size 8 --eval-every 0 --steps 4 --no-final-ckpt >"$TMP/rec.out" 2>&1) \
    || die "the recording for README's commands: $(tail -3 "$TMP/rec.out")"

n=0
while IFS= read -r line; do
    cmd=$(printf '%s\n' "$line" | sed 's/^ *//; s/ \{1,\}#.*$//; s/ *$//')
    eval "set -- $cmd" || die "README: cannot split: $cmd"
    shift # ddptop
    sub=run
    case ${1:-} in run | listen | sampler | export | replay | attach) sub=$1 ;; esac
    case $sub in
    run | listen)
        out=$(cd "$PCWD" && DDPTOP_PARSE_ONLY=1 timeout 20 "$DDPTOP" "$@" 2>&1) \
            || die "README: \`$cmd\` does not parse: $out"
        # its trainer options: the built-in trainer's own check
        tr=() dd=0
        for a in "$@"; do [ $dd = 1 ] && tr+=("$a"); [ "$a" = -- ] && dd=1; done
        if [ ${#tr[@]} -gt 0 ]; then
            out=$(cd "$PCWD" && DDPTOP_CHECK_ARGS=1 timeout 60 "$W" --timeout 300 "${tr[@]}" 2>&1) \
                || die "README: \`$cmd\`: the trainer refuses its options: $out"
        fi ;;
    sampler | export)
        out=$(cd "$CWD" && timeout 60 "$DDPTOP" "$@" 2>&1 >/dev/null) || die "README: \`$cmd\` failed: $out" ;;
    replay)
        out=$(cd "$CWD" && timeout 60 "$DDPTOP" "$@" --headless 2>&1 >/dev/null) || die "README: \`$cmd\` (--headless) failed: $out" ;;
    attach)
        out=$(cd "$CWD" && timeout 30 "$DDPTOP" "$@" --headless --wait 1 2>&1 >/dev/null)
        rc=$?
        [ $rc != 2 ] && [ $rc != 124 ] || die "README: \`$cmd\`: exit $rc: $out" ;;
    esac
    n=$((n + 1))
done < <(grep -hE '^    ddptop( |$)' README.md examples/README.md)
[ $n -ge 20 ] || die "only $n ddptop command lines found in README.md's and examples/README.md's code blocks"
echo "ok: README.md's and examples/README.md's $n ddptop command lines parse"

# Every --flag README.md names is a parser's (the lesson scripts' own: their argparse).
for o in $(grep -o -- '--[a-z][a-z0-9_-]*' README.md | sort -u); do
    known_run "$o" && continue
    k=0
    for c in sampler export replay attach listen; do known_sub $c "$o" && { k=1; break; }; done
    [ $k = 1 ] && continue
    grep -q -- "\"$o\"" examples/*.py && continue
    die "README.md names $o, which no parser knows"
done
echo "ok: every --flag in README.md is known to a parser"
