/* test_stacktree.c — every rank's stacks merged into one tree at 1024
 * ranks: the odd rank stands apart as its own small set, first; two
 * gatherings tell the stuck frames from the ones a rank moved through;
 * memory and rows stay bounded however different the stacks are; a
 * faulthandler dump goes in outermost first. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/stacktree.h"

#define WORLD 1024

static uint64_t bits[WORLD / 64];

static void set_bits(const int *r, int n)
{
    memset(bits, 0, sizeof bits);
    for (int i = 0; i < n; i++) bits[r[i] / 64] |= 1ull << (r[i] % 64);
}

/* The job of the examples: every rank's beat thread in its loop, every
 * main thread in all_reduce at train.py:45 but rank 1's, in a barrier at
 * train.py:42. step: each rank's step (the token). */
static void gather(StackTree *t, const int *line_of, const uint64_t *step)
{
    for (int r = 0; r < WORLD; r++) {
        const char *beat[] = { "threading.py:995 _bootstrap", "threading.py:1038 _bootstrap_inner", "beat.py:110 _loop",
                               "threading.py:629 wait" };
        CHECK(stacktree_add(t, r, 0x7f00, beat, 4, step[r]) == 0, "rank %d", r);
        char mainline[64];
        snprintf(mainline, sizeof mainline, "train.py:%d main", line_of[r]);
        const char *call =
            line_of[r] == 42 ? "distributed_c10d.py:3328 barrier" : "distributed_c10d.py:1536 all_reduce";
        const char *main_[] = { "train.py:60 <module>", mainline, call };
        CHECK(stacktree_add(t, r, 0x7f01, main_, 3, step[r]) == 0, "rank %d", r);
    }
}

static const StackRow *find(const StackRow *rows, int n, const char *label)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].label, label)) return &rows[i];
    return NULL;
}

int main(void)
{
    char buf[8192];

    TEST_BEGIN("ranges_compact_and_cut");
    int some[] = { 0, 2, 3, 4, 1023 };
    set_bits(some, 5);
    stacktree_ranges(bits, WORLD, buf, sizeof buf);
    CHECK(!strcmp(buf, "0,2-4,1023"), "got '%s'", buf);
    memset(bits, 0, sizeof bits);
    stacktree_ranges(bits, WORLD, buf, sizeof buf);
    CHECK(!strcmp(buf, ""), "empty: '%s'", buf);
    for (int r = 0; r < WORLD; r += 2) bits[r / 64] |= 1ull << (r % 64);
    size_t n = stacktree_ranges(bits, WORLD, buf, 12);
    CHECK(n < 12 && !strcmp(buf, "0,2,4,6,8+"), "cut: '%s' (%zu)", buf, n);
    n = stacktree_ranges(bits, WORLD, buf, sizeof buf);
    CHECK(n > 2000 && !strchr(buf, '+') && !strncmp(buf + n - 5, ",1022", 5), "whole: %zu", n);
    TEST_END();

    TEST_BEGIN("1024_ranks_merge_the_odd_rank_first");
    StackTree *a = stacktree_new(WORLD, 0);
    int line_of[WORLD];
    uint64_t step[WORLD];
    for (int r = 0; r < WORLD; r++) {
        line_of[r] = r == 1 ? 42 : 45;
        step[r] = 17;
    }
    gather(a, line_of, step);
    CHECK(stacktree_ranks(a) == WORLD && stacktree_stacks(a) == 2 * WORLD, "ranks %d stacks %d", stacktree_ranks(a),
          stacktree_stacks(a));
    CHECK(stacktree_nodes(a) == 4 + 1 + 2 + 2, "nodes %d (one a distinct frame)", stacktree_nodes(a));
    StackRow rows[64];
    int nr = stacktree_rows(a, rows, 64);
    CHECK(nr == 9, "rows %d", nr);
    const StackRow *odd = find(rows, nr, "train.py:42 main"), *crowd = find(rows, nr, "train.py:45 main");
    CHECK(odd && crowd && odd < crowd, "the smaller set first");
    CHECK(odd && odd->count == 1 && !strcmp(odd->ranks, "1") && odd->odd && odd->branch, "odd %s",
          odd ? odd->ranks : "-");
    CHECK(crowd && crowd->count == 1023 && !strcmp(crowd->ranks, "0,2-1023") && !crowd->odd, "crowd %s",
          crowd ? crowd->ranks : "-");
    const StackRow *barrier = find(rows, nr, "distributed_c10d.py:3328 barrier");
    CHECK(barrier && barrier->odd && barrier->indent == odd->indent + 2, "under the odd frame, odd too");
    const StackRow *top = find(rows, nr, "train.py:60 <module>");
    CHECK(top && top->count == WORLD && !strcmp(top->ranks, "0-1023") && top->branch, "root frame %s",
          top ? top->ranks : "-");
    CHECK(!stacktree_compared(a) && stacktree_stuck(a) == 0, "no stuck mark before a comparison");
    size_t tl = stacktree_text(a, buf, sizeof buf);
    CHECK(tl > 0 && strstr(buf, "  !     1  1                   + train.py:42 main\n"), "text:\n%s", buf);
    TEST_END();

    TEST_BEGIN("two_gatherings_mark_the_stuck_frames");
    StackTree *b = stacktree_new(WORLD, 0);
    line_of[5] = 44; /* rank 5 moved on to another line */
    step[9] = 18;    /* rank 9 trained a step in between, caught on the same line */
    gather(b, line_of, step);
    stacktree_compare(b, a);
    nr = stacktree_rows(b, rows, 64);
    const StackRow *r1 = find(rows, nr, "distributed_c10d.py:3328 barrier");
    const StackRow *r5 = find(rows, nr, "train.py:44 main");
    const StackRow *rest = find(rows, nr, "train.py:45 main");
    const StackRow *mod = find(rows, nr, "train.py:60 <module>");
    CHECK(r1 && r1->stuck, "rank 1's barrier: stuck");
    CHECK(r5 && !r5->stuck && !strcmp(r5->ranks, "5"), "rank 5 moved");
    CHECK(rest && !rest->stuck && !strcmp(rest->ranks, "0,2-4,6-1023"), "rank 9 moved through line 45: %s",
          rest ? rest->ranks : "-");
    CHECK(mod && !mod->stuck, "ranks moved through <module>");
    /* rank 9 back at step 17 as in the first gathering: nobody moved at 45 */
    step[9] = 17;
    stacktree_clear(b);
    gather(b, line_of, step);
    stacktree_compare(b, a);
    nr = stacktree_rows(b, rows, 64);
    rest = find(rows, nr, "train.py:45 main");
    CHECK(rest && rest->stuck, "line 45: stuck");
    CHECK(stacktree_stuck(b) == 4 + 2 + 2, "stuck frames %d: the beat thread's, rank 1's, the crowd's at 45",
          stacktree_stuck(b));
    stacktree_text(b, buf, sizeof buf);
    CHECK(strstr(buf, "* !     1  1                   + train.py:42 main\n"), "text:\n%s", buf);
    Json w;
    json_init_buf(&w);
    stacktree_json(b, &w);
    const char *js = json_buf(&w, NULL);
    CHECK(js && strstr(js, "\"frame\":\"train.py:44 main\",\"n\":1,\"ranks\":\"5\",\"stuck\":false,\"odd\":true"),
          "json: %.400s", js ? js : "(null)");
    CHECK(js && strstr(js, "\"world\":1024,\"ranks\":1024,\"stacks\":2048,\"compared\":true,\"stuck\":8"), "json head");
    json_done(&w);
    stacktree_free(&a);
    stacktree_free(&b);
    CHECK(a == NULL && b == NULL, "freed");
    TEST_END();

    TEST_BEGIN("bounded_nodes_rows_and_depth");
    StackTree *t = stacktree_new(WORLD, 512);
    /* every rank a different stack 200 frames deep */
    char(*fr)[32] = malloc(200 * sizeof *fr);
    const char *fp[200];
    for (int r = 0; r < WORLD; r++) {
        for (int i = 0; i < 200; i++) {
            snprintf(fr[i], sizeof fr[i], "f.py:%d r%d", i, i < 3 ? 0 : r);
            fp[i] = fr[i];
        }
        stacktree_add(t, r, 1, fp, 200, 0);
    }
    free(fr);
    CHECK(stacktree_nodes(t) <= 512 + 1, "nodes %d over the cap", stacktree_nodes(t));
    CHECK(stacktree_ranks(t) == WORLD, "every rank counted: %d", stacktree_ranks(t));
    StackRow *many = malloc(4096 * sizeof *many);
    nr = stacktree_rows(t, many, 4096);
    const StackRow *more = find(many, nr < 4096 ? nr : 4096, "(more stacks than the tree holds)");
    CHECK(more && more->count > 0 && more->folded, "the stacks past the cap are counted");
    CHECK(nr <= 3 + STACKTREE_FANOUT * STACKTREE_DEPTH, "rows %d: bounded by the fan-out", nr);
    stacktree_free(&t);

    /* every rank at its own line: one screen still */
    t = stacktree_new(WORLD, 0);
    for (int r = 0; r < WORLD; r++) {
        char leaf[32];
        snprintf(leaf, sizeof leaf, "train.py:%d main", 1000 + r);
        const char *st[] = { "train.py:60 <module>", leaf };
        stacktree_add(t, r, 1, st, 2, 0);
    }
    nr = stacktree_rows(t, many, 4096);
    const StackRow *fold = find(many, nr, "(1017 more branches)");
    CHECK(nr == 1 + STACKTREE_FANOUT, "rows %d", nr);
    CHECK(fold && fold->folded && fold->count == 1017 && !strcmp(fold->ranks, "6-1022"),
          "the middle branches fold: %d %s", fold ? fold->count : -1, fold ? fold->ranks : "-");
    CHECK(!strcmp(many[nr - 1].label, "train.py:2023 main"), "the last branch stays: %s", many[nr - 1].label);
    stacktree_free(&t);

    /* one deep stack: its middle folds into one node */
    t = stacktree_new(4, 0);
    char(*deep)[32] = malloc(300 * sizeof *deep);
    for (int i = 0; i < 300; i++) {
        snprintf(deep[i], sizeof deep[i], "rec.py:%d f", i);
    }
    const char **dp = malloc(300 * sizeof *dp);
    for (int i = 0; i < 300; i++) dp[i] = deep[i];
    stacktree_add(t, 2, 1, dp, 300, 0);
    nr = stacktree_rows(t, many, 4096);
    CHECK(stacktree_nodes(t) == STACKTREE_DEPTH, "nodes %d", stacktree_nodes(t));
    /* and on the screen, the run of 64 frames as its first, the middle, its last two */
    CHECK(nr == 4 && !strcmp(many[0].label, "rec.py:0 f") && !strcmp(many[1].label, "... 61 frames") &&
              many[1].folded && !strcmp(many[2].label, "rec.py:298 f") && !strcmp(many[3].label, "rec.py:299 f"),
          "rows %d: %s | %s | %s", nr, many[0].label, many[1].label, nr > 3 ? many[3].label : "-");
    /* a report's text folds nothing: every one of the 64 frames kept, the middle's too */
    {
        char *whole = malloc(1 << 16), *folded = malloc(1 << 16);
        stacktree_text_whole(t, whole, 1 << 16);
        stacktree_text(t, folded, 1 << 16);
        int lines = 0, frames = 0;
        for (const char *p = whole; *p; p++) lines += *p == '\n';
        for (const char *p = whole; (p = strstr(p, " rec.py:")); p++) frames++;
        /* the 64 nodes the tree keeps of 300 frames: 63 frames and its own fold of the rest */
        CHECK(lines == STACKTREE_DEPTH && frames == STACKTREE_DEPTH - 1 && !strstr(whole, "... 61 frames"),
              "whole: %d lines, %d frames", lines, frames);
        CHECK(strstr(folded, "... 61 frames\n") != NULL, "the screen's text folds");
        free(whole);
        free(folded);
    }
    free(dp);
    free(deep);
    free(many);
    stacktree_free(&t);
    TEST_END();

    TEST_BEGIN("faulthandler_dump_outermost_first");
    t = stacktree_new(2, 0);
    const char *dump = "rank 1 step 7\n"
                       "Thread 0x00007f1c2a7fc640 (most recent call first):\n"
                       "  File \"/usr/lib/python3.11/threading.py\", line 320 in wait\n"
                       "  File \"/x/ddptop/beat.py\", line 110 in _loop\n"
                       "\n"
                       "Current thread 0x00007f1c3b1e1000 (most recent call first):\n"
                       "  File \"/usr/lib/python3/dist-packages/torch/distributed/__init__.py\", line 9 in f\n"
                       "  File \"examples/train.py\", line 99 in main\n";
    CHECK(stacktree_add_faulthandler(t, 1, dump, strlen(dump), 3) == 2, "two threads");
    nr = stacktree_rows(t, rows, 64);
    CHECK(nr == 4, "rows %d", nr);
    CHECK(nr == 4 && !strcmp(rows[0].label, "beat.py:110 _loop") && !strcmp(rows[1].label, "threading.py:320 wait") &&
              !strcmp(rows[2].label, "train.py:99 main") && !strcmp(rows[3].label, "distributed/__init__.py:9 f"),
          "%s | %s | %s | %s", rows[0].label, rows[1].label, rows[2].label, rows[3].label);
    /* the adapter's heartbeat thread took the signal and wrote the dump: left out */
    const char *beat = "Current thread 0x00007f1c2a7fc640 (most recent call first):\n"
                       "  File \"/usr/lib/python3.11/threading.py\", line 324 in wait\n"
                       "  File \"/w/workers/python/ddptop/beat.py\", line 107 in _loop\n"
                       "\n"
                       "Thread 0x00007f1c3b1e1000 (most recent call first):\n"
                       "  File \"examples/train.py\", line 99 in main\n";
    CHECK(stacktree_add_faulthandler(t, 0, beat, strlen(beat), 3) == 1, "the beat thread is ddptop's");
    nr = stacktree_rows(t, rows, 64);
    CHECK(nr == 4 && !strcmp(rows[2].label, "train.py:99 main") && !strcmp(rows[2].ranks, "0-1"), "%d rows, %s %s", nr,
          rows[2].label, rows[2].ranks);
    CHECK(stacktree_add(t, 2, 0, NULL, 0, 0) == -1 && stacktree_add(t, -1, 0, NULL, 0, 0) == -1, "rank out of range");
    CHECK(stacktree_new(0, 0) == NULL, "no world");
    stacktree_free(&t);
    TEST_END();

    /* A look's text that starts with the rest of the previous look's dump
     * (it was still being written when the second look began): each
     * thread once, from the newer dump. */
    TEST_BEGIN("faulthandler_thread_twice_its_last_block_counts");
    t = stacktree_new(1, 0);
    const char *two = "Thread 0x00000000000000b2 (most recent call first):\n"
                      "  File \"slow.py\", line 5 in dump_1\n"
                      "\n"
                      "Thread 0x00000000000000a1 (most recent call first):\n"
                      "  File \"slow.py\", line 9 in dump_2\n"
                      "\n"
                      "Thread 0x00000000000000b2 (most recent call first):\n"
                      "  File \"slow.py\", line 5 in dump_2\n";
    CHECK(stacktree_add_faulthandler(t, 0, two, strlen(two), 1) == 2, "two threads, not three");
    nr = stacktree_rows(t, rows, 64);
    bool old = false;
    for (int i = 0; i < nr; i++) old = old || strstr(rows[i].label, "dump_1");
    CHECK(nr == 2 && stacktree_stacks(t) == 2 && !old, "%d rows, %d stacks, the older dump's block %s", nr,
          stacktree_stacks(t), old ? "kept" : "dropped");
    stacktree_free(&t);
    TEST_END();

    CHECK_EXIT();
}
