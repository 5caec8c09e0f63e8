/* export.c — `ddptop export`: a recording to other tools' formats (record/export.c).
 * That module owns its command line; this is its table entry. Main thread.
 */
#include "cmd/cmd.h"

#include "record/export.h"

int cmd_export(int argc, char **argv) { return export_main(argc, argv); }
