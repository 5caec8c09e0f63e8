/* attach.h — `ddptop attach ENDPOINT [--control] [--headless [--json]]
 * [--keys FILE] [--wait S]`: a second screen on a running job, from another
 * terminal or host.
 *
 * The viewer is a DEALER on the job's control endpoint (routing id
 * "view-<pid>-<random>") that says "attach" once a second; ddptop answers
 * with a snapshot of the job, then forwards every frame its ranks send
 * (viewers.h; docs/PROTOCOL.md, "Attached viewers"). The frames feed a job
 * model of its own, drawn by the live screen or printed as `ddptop run
 * --headless` prints. Read-only unless --control: then c d p a act on the
 * job as they do on ddptop's own screen. q (or Ctrl-C) detaches; the job
 * goes on.
 *
 * Owns: its socket, its Job and view. Main thread.
 */
#ifndef DDPTOP_ATTACH_H
#define DDPTOP_ATTACH_H

/* argv holds what follows "attach" (tui/cmd/cmd.h's convention). Returns 0 after detaching or
 * once the job has ended, 2 for bad input (one line on stderr), 1 when no
 * job answered within --wait seconds or the attach was refused. */
int attach_main(int argc, char **argv);

/* `ddptop stacks ENDPOINT [--json] [--keys FILE] [--wait S]`: attached as a
 * read-only viewer, ask the job for every rank's stacks merged (viewers.h,
 * "stacks") and print the tree (model/stacktree.h's text, or its JSON).
 * Returns 0 once printed, 2 for bad input, 1 when no job or no tree came. */
int attach_stacks_main(int argc, char **argv);

#endif
