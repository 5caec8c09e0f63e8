#!/usr/bin/env bash
# tests/layers.sh — `make check-layers`: the layering rules hold.
#  1. The job model (tui/model/) links into a program with msgpack and libm
#     alone: no ncurses, no ZeroMQ, nothing from workers/.
#  2. transport/ links into a program without workers/ or tui/.
#  3. A file including a folder its layer may not use fails to compile.
#  4. No source reaches around the include directories ("../").
#  5. The job model reads no clock.
# Env from the Makefile: BUILD CC CFLAGS LIBS_MODEL EXT_MODEL LIBS_NET EXT_NET LAYERS.
set -u
cd "$(dirname "$0")/.."
fail=0
say() { echo "check-layers: $*"; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# shellcheck disable=SC2086
if $CC -o "$tmp/job" "$BUILD/tests/test_job.o" $LIBS_MODEL $EXT_MODEL 2>"$tmp/err"; then
    case " $EXT_MODEL " in *ncurses*|*zmq*) say "FAIL: the model's libraries name ncurses or zmq: $EXT_MODEL"; fail=1;; esac
    "$tmp/job" >/dev/null 2>&1 || { say "FAIL: test_job linked without ncurses/zmq does not pass"; fail=1; }
else
    say "FAIL: the job model does not link without ncurses/zmq:"; head -5 "$tmp/err"; fail=1
fi
for lib in $LIBS_MODEL $LIBS_NET; do
    case "$lib" in */libbase.a|*/libwire.a|*/libnet.a|*/libmodel.a) ;; *) say "FAIL: $lib is not a transport or model library"; fail=1;; esac
done
# shellcheck disable=SC2086
if ! $CC -o "$tmp/codec" "$BUILD/tests/test_codec.o" $LIBS_NET $EXT_NET 2>"$tmp/err"; then
    say "FAIL: transport does not link alone:"; head -5 "$tmp/err"; fail=1
fi
# shellcheck disable=SC2086
# Symbols transport's archives need must come from transport or the system.
for lib in $LIBS_NET; do
    nm "$lib" 2>/dev/null | awk '$1=="U"{print $2}'
done | sort -u > "$tmp/u"
for lib in $LIBS_NET; do nm --defined-only "$lib" 2>/dev/null | awk 'NF==3{print $3}'; done | sort -u > "$tmp/d"
bad=$(comm -23 "$tmp/u" "$tmp/d" | grep -E '^(job_|view_|run_|launcher_|trainer_|comm_|model_|ckpt_|uplink_)' || true)
[ -z "$bad" ] || { say "FAIL: transport needs symbols from workers/ or tui/: $bad"; fail=1; }

# A forbidden include: the model may not use the screen, transport not the model.
probe() { # layer header
    local tree=$1 layer=$2 hdr=$3
    printf '#include "%s"\nint probe_x;\n' "$hdr" > "$tmp/probe.c"
    # shellcheck disable=SC2086
    if $CC $CFLAGS -I"$BUILD/inc/$layer" -fsyntax-only -MF "$tmp/probe.d" "$tmp/probe.c" 2>/dev/null; then
        say "FAIL: $tree/$layer/ may include $hdr"; fail=1
    fi
}
probe tui model screen/draw.h
probe tui model net/zsock.h
probe transport wire model/job.h
probe transport net train/trainer.h
probe workers nn comm/comm.h
probe tui view launch/launcher.h
# ...and an allowed one compiles (the probe itself works). -MF: CFLAGS's -MMD
# would leave a-ok.d in the checkout.
printf '#include "wire/protocol.h"\nint probe_x;\n' > "$tmp/ok.c"
# shellcheck disable=SC2086
$CC $CFLAGS -I"$BUILD/inc/model" -fsyntax-only -MF "$tmp/ok.d" "$tmp/ok.c" || { say "FAIL: model cannot include wire/protocol.h"; fail=1; }

# The job model is told the time; it never reads a clock (replay feeds it recorded times).
clocky=$(grep -lE 'clock_gettime|base/clock\.h|\btime\(|gettimeofday' tui/model/*.[ch] 2>/dev/null)
[ -z "$clocky" ] || { say "FAIL: the job model reads the clock: $clocky"; fail=1; }

around=$(git ls-files 'transport/*' 'workers/*' 'tui/*' | grep -E '\.(c|h|cc|cu|cuh)$' | xargs grep -ln '#include "\.\./' 2>/dev/null)
[ -z "$around" ] || { say "FAIL: includes reaching around the layers: $around"; fail=1; }

if [ $fail -eq 0 ]; then say "ok (model without ncurses/zmq or a clock, transport alone, forbidden includes refused)"; fi
exit $fail
