/* stacks.c — `ddptop stacks`: every rank's stacks of a running job, merged
 * (attach/client.c asks, tui/run/stacks.c gathers). That module owns its
 * command line; this is its table entry. Main thread.
 */
#include "cmd/cmd.h"

#include "attach/client.h"

int cmd_stacks(int argc, char **argv) { return attach_stacks_main(argc, argv); }
