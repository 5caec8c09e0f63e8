/* stacktree.h — every rank's stacks merged into one call prefix tree, as
 * LLNL's STAT does: a node is a frame ("train.py:57 save"), the edge into
 * it the set of ranks whose stack took it, so ranks that went their own way
 * stand out as a small set beside the crowd. Two gatherings a second apart
 * tell progress from a hang: a frame no rank moved through is stuck.
 *
 * Owns: the tree, its rank sets (a bit a rank), the comparison, and its
 * three faces: rows for the screen, text (`ddptop stacks`), JSON (hangs in
 * --json, `ddptop stacks --json`). Bounded: at most max_nodes nodes (the
 * stacks past that are counted under one "more stacks" node), at most
 * STACKTREE_DEPTH frames a stack (the middle of a deeper one folded into
 * one node). Pure: no curses, no clock, no I/O. Any one thread.
 */
#ifndef DDPTOP_STACKTREE_H
#define DDPTOP_STACKTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/json.h"

#define STACKTREE_NODES_DEFAULT 4096
#define STACKTREE_DEPTH         64 /* frames kept of one stack: 8 outermost, the rest innermost */
#define STACKTREE_LABEL         96 /* bytes of a frame's label, with its NUL */
#define STACKTREE_FANOUT        8  /* branches a row list shows under one node; the middle ones fold */
#define STACKTREE_RANKS_COL     16 /* the ranks column of rows and text (cut with "+") */

typedef struct StackTree StackTree;

/* A tree for ranks 0..world-1 of at most max_nodes nodes (0: the default).
 * NULL when out of memory or world < 1. */
StackTree *stacktree_new(int world, int max_nodes);
void stacktree_free(StackTree **t);
/* Empty it again (same world, same cap). */
void stacktree_clear(StackTree *t);

/* Add one stack of rank (a thread's): frames[n], outermost first. thread
 * tells a rank's stacks apart across gatherings (a thread id); token is what
 * else counts as progress (the rank's step: a rank that trained on between
 * two gatherings moved even when both caught it on the same line).
 * Returns 0, or -1 for a rank out of range. */
int stacktree_add(StackTree *t, int rank, uint64_t thread, const char *const *frames, int n, uint64_t token);
/* Every thread of a faulthandler dump (model/pystack.h's format) of rank
 * but the torch adapter's heartbeat thread that wrote it (PyStackThread.
 * beat). A thread named twice in text (the rest of an earlier dump, then
 * a new one) counts once, with its last block. Returns how many threads
 * it added. */
int stacktree_add_faulthandler(StackTree *t, int rank, const char *text, size_t len, uint64_t token);

/* Mark the frames no rank moved through since prev (an earlier gathering
 * of the same job): a rank moved on a stack when prev had no stack of the
 * same rank with the same thread, frames and token. */
void stacktree_compare(StackTree *t, const StackTree *prev);
/* Whether stacktree_compare ran on t. */
bool stacktree_compared(const StackTree *t);

int stacktree_world(const StackTree *t);
int stacktree_nodes(const StackTree *t);  /* the frames held (the root not counted) */
int stacktree_ranks(const StackTree *t);  /* ranks with at least one stack */
int stacktree_stacks(const StackTree *t); /* stacks added */
int stacktree_stuck(const StackTree *t);  /* frames marked stuck */

/* Ranks as compact ranges, "0,2-1023" (ascending; "" for none) into
 * out[len]. A list that does not fit ends in "+" (more ranks follow).
 * Returns its length. */
size_t stacktree_ranges(const uint64_t *bits, int world, char *out, size_t len);

/* One row of the tree as shown: depth-first, each node's children smallest
 * set first (then by frame), indented only where the tree branches; a run
 * of more than 5 frames with one set and one stuck mark (the interpreter's
 * and the launcher's frames, a recursion) as its first frame, one folded
 * "... N frames" row and its last two frames; more than STACKTREE_FANOUT
 * branches under one frame as the smallest ones, one folded "(N more
 * branches)" row and the largest. */
typedef struct {
    int indent;                          /* columns */
    int count;                           /* ranks through this frame */
    bool stuck;                          /* no rank moved here (after a comparison) */
    bool odd;                            /* a smaller set than a sibling's, or under one */
    bool folded;                         /* "N more branches" or folded frames */
    bool branch;                         /* starts a branch: "+ " before the frame */
    char ranks[STACKTREE_RANKS_COL + 1]; /* the set, cut with "+" */
    char label[STACKTREE_LABEL + 24];
} StackRow;

/* The rows into rows[max]; returns how many the tree has (may exceed max). */
int stacktree_rows(const StackTree *t, StackRow *rows, int max);

/* The rows as text, one a line, "S O COUNT  RANKS  INDENT FRAME": S is "*"
 * for stuck, O "!" for an odd set, a branch's first frame after "+ ". Into out[len] (cut at a line). Returns
 * the length written. */
size_t stacktree_text(const StackTree *t, char *out, size_t len);
/* The same with nothing folded: every frame of a long run, every branch (a
 * hang report's tree.txt, where the user's frame must not hide in a fold). */
size_t stacktree_text_whole(const StackTree *t, char *out, size_t len);

/* As one JSON object: {"world","ranks","stacks","compared","stuck",
 * "nodes":[{"id","parent","frame","n","ranks","stuck","odd"}]} with the
 * nodes depth-first in row order (parent -1 at the top), every rank set
 * whole. */
void stacktree_json(const StackTree *t, Json *w);

#endif
