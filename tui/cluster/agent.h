/* agent.h — a node K > 0 of a multi-node job (docs/CLUSTER.md). Main thread.
 */
#ifndef DDPTOP_AGENT_H
#define DDPTOP_AGENT_H

#include "launch/options.h"

/* A node K > 0 of a multi-node job: start this node's ranks when node 0
 * says so, report their exits, relay node 0's signals (tui/cluster/agent.c). */
int agent_run(const RunOptions *o);

#endif
