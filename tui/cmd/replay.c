/* replay.c — `ddptop replay`: a recording played in the live screen (record/replay.c).
 * That module owns its command line; this is its table entry. Main thread.
 */
#include "cmd/cmd.h"

#include "record/replay.h"

int cmd_replay(int argc, char **argv) { return replay_main(argc, argv); }
