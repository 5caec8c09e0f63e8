/* attach.c — `ddptop attach`: a second screen on a running job (attach/client.c).
 * That module owns its command line; this is its table entry. Main thread.
 */
#include "cmd/cmd.h"

#include "attach/client.h"

int cmd_attach(int argc, char **argv) { return attach_main(argc, argv); }
