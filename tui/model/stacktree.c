/* stacktree.c — every rank's stacks in one prefix tree. See stacktree.h.
 *
 * Nodes live in one array (node 0 the root, the "more stacks" node made
 * when the cap is reached) with their rank sets in another, world bits a
 * node; children are a sibling list, ordered only when rows are made. Each
 * stack added is also kept as a hash of (thread, frames, token) with its
 * leaf, so a later gathering can tell which ranks moved.
 */
#include "model/stacktree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/pystack.h"

#define KEEP_OUTER  8  /* outermost frames kept of a stack deeper than STACKTREE_DEPTH */
#define PATHS_RANK  64 /* stacks a rank keeps for the comparison */
#define INDENT_MAX  40
#define CHAIN_WHOLE 5 /* frames of one run shown whole; a longer one folds its middle */

typedef struct {
    int parent, child, sibling; /* -1: none */
    int nchild;
    int count;   /* ranks in the set */
    int moved;   /* stacks through here that moved since the compared gathering */
    bool folded; /* the fold of a deep stack, or the "more stacks" node */
    char label[STACKTREE_LABEL];
} Node;

typedef struct {
    int rank, next; /* next: the rank's previous stack */
    int leaf;
    uint64_t hash;
} Path;

struct StackTree {
    int world, words, max_nodes;
    int n_nodes; /* used, root included */
    int more;    /* the "more stacks" node, -1 until needed */
    Node *nodes;
    uint64_t *bits; /* [max_nodes+2][words] */
    Path *paths;
    int n_paths, cap_paths;
    int *head; /* [world]: the rank's newest path, -1 */
    int n_ranks, n_stacks;
    bool compared;
};

static uint64_t *set_of(const StackTree *t, int node) { return t->bits + (size_t)node * (size_t)t->words; }

static void node_init(StackTree *t, int i, int parent, const char *label, bool folded)
{
    Node *n = &t->nodes[i];
    n->parent = parent;
    n->child = n->sibling = -1;
    n->nchild = n->count = n->moved = 0;
    n->folded = folded;
    snprintf(n->label, sizeof n->label, "%s", label);
    memset(set_of(t, i), 0, (size_t)t->words * sizeof(uint64_t));
    if (parent >= 0) {
        n->sibling = t->nodes[parent].child;
        t->nodes[parent].child = i;
        t->nodes[parent].nchild++;
    }
}

void stacktree_clear(StackTree *t)
{
    if (!t) return;
    t->n_nodes = 1;
    t->more = -1;
    node_init(t, 0, -1, "", false);
    t->n_paths = 0;
    for (int r = 0; r < t->world; r++) t->head[r] = -1;
    t->n_ranks = t->n_stacks = 0;
    t->compared = false;
}

StackTree *stacktree_new(int world, int max_nodes)
{
    if (world < 1) return NULL;
    if (max_nodes <= 0) max_nodes = STACKTREE_NODES_DEFAULT;
    StackTree *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->world = world;
    t->words = (world + 63) / 64;
    t->max_nodes = max_nodes;
    t->cap_paths = world * PATHS_RANK;
    t->nodes = malloc((size_t)(max_nodes + 2) * sizeof *t->nodes);
    t->bits = malloc((size_t)(max_nodes + 2) * (size_t)t->words * sizeof(uint64_t));
    t->head = malloc((size_t)world * sizeof *t->head);
    if (!t->nodes || !t->bits || !t->head) {
        stacktree_free(&t);
        return NULL;
    }
    stacktree_clear(t);
    return t;
}

void stacktree_free(StackTree **p)
{
    if (!p || !*p) return;
    StackTree *t = *p;
    free(t->nodes);
    free(t->bits);
    free(t->paths);
    free(t->head);
    free(t);
    *p = NULL;
}

/* Take rank into node's set. */
static void take(StackTree *t, int node, int rank)
{
    uint64_t *s = set_of(t, node), m = 1ull << (rank % 64);
    if (!(s[rank / 64] & m)) {
        s[rank / 64] |= m;
        t->nodes[node].count++;
    }
}

/* The child of parent labelled label (made when missing); -1 at the cap. */
static int child(StackTree *t, int parent, const char *label, bool folded)
{
    for (int c = t->nodes[parent].child; c >= 0; c = t->nodes[c].sibling)
        if (!strncmp(t->nodes[c].label, label, STACKTREE_LABEL - 1)) return c;
    if (t->n_nodes >= t->max_nodes + 1) return -1;
    int i = t->n_nodes++;
    node_init(t, i, parent, label, folded);
    return i;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

int stacktree_add(StackTree *t, int rank, uint64_t thread, const char *const *frames, int n, uint64_t token)
{
    if (!t || rank < 0 || rank >= t->world || n < 0) return -1;
    uint64_t h = fnv(0xcbf29ce484222325ull, &thread, sizeof thread);
    h = fnv(h, &token, sizeof token);
    int node = 0;
    take(t, 0, rank);
    for (int i = 0; i < n; i++) {
        const char *label = frames[i] ? frames[i] : "?";
        h = fnv(h, label, strlen(label) + 1);
        if (n > STACKTREE_DEPTH && i >= KEEP_OUTER && i < n - (STACKTREE_DEPTH - KEEP_OUTER - 1)) {
            if (i > KEEP_OUTER) continue; /* one node stands for the whole middle */
            label = "... (frames folded)";
        }
        int c = node < 0 ? -1 : child(t, node, label, i == KEEP_OUTER && n > STACKTREE_DEPTH);
        if (c < 0) { /* at the cap: the rest of this stack is counted, not kept */
            if (t->more < 0 && t->n_nodes < t->max_nodes + 2) {
                t->more = t->n_nodes++;
                node_init(t, t->more, 0, "(more stacks than the tree holds)", true);
            }
            if (t->more >= 0) take(t, t->more, rank);
            node = t->more;
            for (i++; i < n; i++) h = fnv(h, frames[i] ? frames[i] : "?", strlen(frames[i] ? frames[i] : "?") + 1);
            break;
        }
        node = c;
        take(t, node, rank);
    }
    if (t->head[rank] < 0) t->n_ranks++;
    t->n_stacks++;
    int have = 0;
    for (int p = t->head[rank]; p >= 0; p = t->paths[p].next) have++;
    if (have < PATHS_RANK) {
        if (t->n_paths == t->cap_paths) return 0; /* cannot happen: world * PATHS_RANK */
        if (!t->paths) {
            t->paths = malloc((size_t)t->cap_paths * sizeof *t->paths);
            if (!t->paths) return 0;
        }
        Path *p = &t->paths[t->n_paths];
        p->rank = rank;
        p->next = t->head[rank];
        p->leaf = node;
        p->hash = h;
        t->head[rank] = t->n_paths++;
    }
    return 0;
}

/* Thread blocks of one text remembered for "the last block of a thread
 * counts": faulthandler writes at most 100 threads a dump. */
#define DUMP_BLOCKS_MAX 1024

typedef struct {
    StackTree *t;
    int rank;
    uint64_t token;
    int added;
    int n;                                   /* blocks seen this pass */
    unsigned long long ids[DUMP_BLOCKS_MAX]; /* pass 1: each block's thread id */
    int n_ids;
    bool adding; /* pass 2 */
} DumpCtx;

static void add_thread(void *ctx, const PyStackThread *th)
{
    DumpCtx *d = ctx;
    int i = d->n++;
    if (!d->adding) {
        if (i < DUMP_BLOCKS_MAX) d->ids[d->n_ids++] = th->id;
        return;
    }
    /* a thread named again later in the text (a second dump after the
     * rest of an earlier one): its later block counts */
    for (int j = i + 1; th->id && i < d->n_ids && j < d->n_ids; j++)
        if (d->ids[j] == th->id) return;
    if (th->beat) return; /* the adapter's heartbeat thread, which wrote the dump: the same on every rank */
    const char *frames[PYSTACK_FRAMES_MAX];
    for (int k = 0; k < th->n; k++) frames[k] = th->frame[k];
    if (stacktree_add(d->t, d->rank, th->id, frames, th->n, d->token) == 0) d->added++;
}

int stacktree_add_faulthandler(StackTree *t, int rank, const char *text, size_t len, uint64_t token)
{
    PyStackThread *th = malloc(sizeof *th);
    DumpCtx *d = calloc(1, sizeof *d);
    if (!th || !d) {
        free(th);
        free(d);
        return 0;
    }
    d->t = t, d->rank = rank, d->token = token;
    pystack_parse(text, len, th, add_thread, d); /* the thread ids, in order */
    d->n = 0;
    d->adding = true;
    pystack_parse(text, len, th, add_thread, d);
    int added = d->added;
    free(th);
    free(d);
    return added;
}

void stacktree_compare(StackTree *t, const StackTree *prev)
{
    if (!t || !prev || prev->world != t->world) return;
    for (int i = 0; i < t->n_nodes; i++) t->nodes[i].moved = 0;
    for (int i = 0; i < t->n_paths; i++) {
        const Path *p = &t->paths[i];
        bool same = false;
        for (int q = prev->head[p->rank]; q >= 0 && !same; q = prev->paths[q].next)
            same = prev->paths[q].hash == p->hash;
        if (same) continue;
        for (int n = p->leaf; n >= 0; n = t->nodes[n].parent) t->nodes[n].moved++;
    }
    t->compared = true;
}

bool stacktree_compared(const StackTree *t) { return t && t->compared; }
int stacktree_world(const StackTree *t) { return t ? t->world : 0; }
int stacktree_nodes(const StackTree *t) { return t ? t->n_nodes - 1 : 0; }
int stacktree_ranks(const StackTree *t) { return t ? t->n_ranks : 0; }
int stacktree_stacks(const StackTree *t) { return t ? t->n_stacks : 0; }

static bool is_stuck(const StackTree *t, int i)
{
    return t->compared && t->nodes[i].count > 0 && t->nodes[i].moved == 0;
}

int stacktree_stuck(const StackTree *t)
{
    int n = 0;
    for (int i = 1; t && i < t->n_nodes; i++) n += is_stuck(t, i);
    return n;
}

size_t stacktree_ranges(const uint64_t *bits, int world, char *out, size_t len)
{
    if (!out || len == 0) return 0;
    size_t o = 0;
    out[0] = '\0';
    for (int r = 0; r < world;) {
        if (!(bits[r / 64] >> (r % 64) & 1)) {
            r++;
            continue;
        }
        int e = r;
        while (e + 1 < world && (bits[(e + 1) / 64] >> ((e + 1) % 64) & 1)) e++;
        char part[32];
        int k = e > r ? snprintf(part, sizeof part, "%s%d-%d", o ? "," : "", r, e)
                      : snprintf(part, sizeof part, "%s%d", o ? "," : "", r);
        if (o + (size_t)k + 1 >= len || (o + (size_t)k + 2 >= len && e + 1 < world)) {
            /* no room for this part and a "+" after it */
            if (o + 1 < len) {
                out[o++] = '+';
                out[o] = '\0';
            } else if (o > 0) {
                out[o - 1] = '+';
            }
            return o;
        }
        memcpy(out + o, part, (size_t)k + 1);
        o += (size_t)k;
        r = e + 1;
    }
    return o;
}

/* ---- rows: depth-first, smallest sets first ---- */

static int by_count(const void *a, const void *b, void *tree)
{
    const StackTree *t = tree;
    const Node *x = &t->nodes[*(const int *)a], *y = &t->nodes[*(const int *)b];
    if (x->count != y->count) return x->count < y->count ? -1 : 1;
    return strcmp(x->label, y->label);
}

/* qsort without a context argument: an insertion sort (children are few;
 * at most max_nodes in all). */
static void sort_children(const StackTree *t, int *c, int n)
{
    for (int i = 1; i < n; i++) {
        int v = c[i], j = i;
        while (j > 0 && by_count(&c[j - 1], &v, (void *)t) > 0) {
            c[j] = c[j - 1];
            j--;
        }
        c[j] = v;
    }
}

/* The node's children, sorted, into a fresh array (*out; caller frees). */
static int children(const StackTree *t, int node, int **out)
{
    int n = t->nodes[node].nchild;
    *out = n > 0 ? malloc((size_t)n * sizeof **out) : NULL;
    if (!*out) return 0;
    int k = 0;
    for (int c = t->nodes[node].child; c >= 0 && k < n; c = t->nodes[c].sibling) (*out)[k++] = c;
    sort_children(t, *out, k);
    return k;
}

typedef struct {
    const StackTree *t;
    StackRow *rows;
    int max, n;
    uint64_t *scratch; /* [words]: a folded row's union */
    bool whole;        /* no folding: every frame, every branch (a report's tree) */
} RowCtx;

static void put_row(RowCtx *c, const uint64_t *set, int count, const char *label, int indent, bool branch, bool stuck,
                    bool odd, bool folded)
{
    if (c->n < c->max) {
        StackRow *r = &c->rows[c->n];
        r->indent = indent;
        r->count = count;
        r->stuck = stuck;
        r->odd = odd;
        r->folded = folded;
        r->branch = branch;
        stacktree_ranges(set, c->t->world, r->ranks, sizeof r->ranks);
        snprintf(r->label, sizeof r->label, "%s", label);
    }
    c->n++;
}

static void rows_under(RowCtx *c, int node, int indent, bool odd)
{
    const StackTree *t = c->t;
    int *kids;
    int n = children(t, node, &kids);
    bool branch = n > 1;
    int at = indent > INDENT_MAX ? INDENT_MAX : indent;
    int largest = n > 0 ? t->nodes[kids[n - 1]].count : 0;
    for (int i = 0; i < n; i++) {
        if (!c->whole && n > STACKTREE_FANOUT && i == STACKTREE_FANOUT - 2) {
            /* the middle branches as one row: the smallest and the largest stay */
            int k = n - 1 - i, count = 0;
            memset(c->scratch, 0, (size_t)t->words * sizeof(uint64_t));
            for (int j = i; j < n - 1; j++) {
                const uint64_t *s = set_of(t, kids[j]);
                for (int w = 0; w < t->words; w++) c->scratch[w] |= s[w];
            }
            for (int w = 0; w < t->words; w++) count += __builtin_popcountll(c->scratch[w]);
            char label[64];
            snprintf(label, sizeof label, "(%d more branches)", k);
            put_row(c, c->scratch, count, label, at, true, false, true, true);
            i = n - 2;
            continue;
        }
        const Node *k = &t->nodes[kids[i]];
        bool kid_odd = odd || (branch && k->count < largest), stuck = is_stuck(t, kids[i]);
        put_row(c, set_of(t, kids[i]), k->count, k->label, at, branch, stuck, kid_odd, k->folded);
        int in = at + (branch ? 2 : 0);
        /* a long run of frames every rank here took alike (the
         * interpreter's and the launcher's, a recursion): its first frame,
         * one row for the middle, its last two */
        int len = 1, last = kids[i];
        for (;;) {
            int ch = t->nodes[last].child;
            if (t->nodes[last].nchild != 1 || t->nodes[ch].count != k->count || is_stuck(t, ch) != stuck) break;
            last = ch;
            len++;
        }
        if (!c->whole && len > CHAIN_WHOLE) {
            int before = t->nodes[last].parent, mid = len - 3;
            char label[64];
            snprintf(label, sizeof label, "... %d frames", mid);
            put_row(c, set_of(t, kids[i]), k->count, label, in, false, stuck, kid_odd, true);
            put_row(c, set_of(t, before), t->nodes[before].count, t->nodes[before].label, in, false, stuck, kid_odd,
                    t->nodes[before].folded);
            put_row(c, set_of(t, last), t->nodes[last].count, t->nodes[last].label, in, false, stuck, kid_odd,
                    t->nodes[last].folded);
            rows_under(c, last, in, kid_odd);
        } else {
            rows_under(c, kids[i], in, kid_odd);
        }
    }
    free(kids);
}

static int rows_of(const StackTree *t, StackRow *rows, int max, bool whole)
{
    if (!t) return 0;
    RowCtx c = { t, rows, max, 0, calloc((size_t)t->words, sizeof(uint64_t)), whole };
    if (!c.scratch) return 0;
    rows_under(&c, 0, 0, false);
    free(c.scratch);
    return c.n;
}

int stacktree_rows(const StackTree *t, StackRow *rows, int max)
{
    return rows_of(t, rows, max, false);
}

static size_t text_of(const StackTree *t, char *out, size_t len, bool whole)
{
    if (!out || len == 0) return 0;
    out[0] = '\0';
    int n = rows_of(t, NULL, 0, whole);
    StackRow *rows = n > 0 ? malloc((size_t)n * sizeof *rows) : NULL;
    if (!rows) return 0;
    n = rows_of(t, rows, n, whole);
    size_t o = 0;
    for (int i = 0; i < n; i++) {
        const StackRow *r = &rows[i];
        char line[STACKTREE_LABEL + 160];
        int k = snprintf(line, sizeof line, "%c %c %5d  %-*s  %*s%s%s\n", r->stuck ? '*' : ' ', r->odd ? '!' : ' ',
                         r->count, STACKTREE_RANKS_COL, r->ranks, r->indent, "", r->branch ? "+ " : "", r->label);
        if (k < 0 || o + (size_t)k + 1 > len) break;
        memcpy(out + o, line, (size_t)k + 1);
        o += (size_t)k;
    }
    free(rows);
    return o;
}

size_t stacktree_text(const StackTree *t, char *out, size_t len)
{
    return text_of(t, out, len, false);
}

size_t stacktree_text_whole(const StackTree *t, char *out, size_t len)
{
    return text_of(t, out, len, true);
}

/* ---- JSON: every node, whole sets ---- */

static void json_under(const StackTree *t, Json *w, int node, int parent_id, int *next_id, char *ranks, size_t rlen,
                       bool odd)
{
    int *kids;
    int n = children(t, node, &kids);
    int largest = n > 0 ? t->nodes[kids[n - 1]].count : 0;
    for (int i = 0; i < n; i++) {
        const Node *k = &t->nodes[kids[i]];
        bool kid_odd = odd || (n > 1 && k->count < largest);
        int id = (*next_id)++;
        stacktree_ranges(set_of(t, kids[i]), t->world, ranks, rlen);
        json_obj(w);
        json_kv_int(w, "id", id);
        json_kv_int(w, "parent", parent_id);
        json_kv_str(w, "frame", k->label);
        json_kv_int(w, "n", k->count);
        json_kv_str(w, "ranks", ranks);
        json_kv_bool(w, "stuck", is_stuck(t, kids[i]));
        json_kv_bool(w, "odd", kid_odd);
        json_obj_end(w);
        json_under(t, w, kids[i], id, next_id, ranks, rlen, kid_odd);
    }
    free(kids);
}

void stacktree_json(const StackTree *t, Json *w)
{
    json_obj(w);
    json_kv_int(w, "world", t ? t->world : 0);
    json_kv_int(w, "ranks", stacktree_ranks(t));
    json_kv_int(w, "stacks", stacktree_stacks(t));
    json_kv_bool(w, "compared", stacktree_compared(t));
    json_kv_int(w, "stuck", stacktree_stuck(t));
    json_key(w, "nodes");
    json_arr(w);
    /* a whole set of world ranks alternating: "0,2,4,...", under 8 bytes a rank */
    size_t rlen = t ? (size_t)t->world * 8 + 16 : 0;
    char *ranks = t ? malloc(rlen) : NULL;
    int next_id = 0;
    if (ranks) json_under(t, w, 0, -1, &next_id, ranks, rlen, false);
    free(ranks);
    json_arr_end(w);
    json_obj_end(w);
}
