/* test_reducer.c — the communication thread (workers/ddp/reducer.c) on a
 * one-rank Gloo communicator: operations finish in submission order with
 * their times recorded, scaling spares the flags, an op the main thread
 * waits for runs on the main thread when the communication thread sleeps,
 * and a failed collective fails every later one instead of hanging. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "comm/comm.h"
#include "ddp/reducer.h"

/* An in-memory store, enough for a one-rank rendezvous. */
#define NKEYS 64
static char g_keys[NKEYS][160];
static void *g_vals[NKEYS];
static size_t g_lens[NKEYS];
static int g_n;

static int st_set(void *ctx, const char *key, const void *val, size_t len, char *err, size_t errlen)
{
    (void)ctx;
    if (g_n == NKEYS) {
        snprintf(err, errlen, "store full");
        return -1;
    }
    snprintf(g_keys[g_n], sizeof g_keys[0], "%s", key);
    g_vals[g_n] = malloc(len + 1);
    memcpy(g_vals[g_n], val, len);
    g_lens[g_n++] = len;
    return 0;
}

static int st_get(void *ctx, const char *key, void **val, size_t *len, int64_t timeout_ms, char *err, size_t errlen)
{
    (void)ctx, (void)timeout_ms;
    for (int i = g_n - 1; i >= 0; i--)
        if (!strcmp(g_keys[i], key)) {
            *val = malloc(g_lens[i] + 1);
            memcpy(*val, g_vals[i], g_lens[i]);
            *len = g_lens[i];
            return 0;
        }
    snprintf(err, errlen, "no key %s", key);
    return 1;
}

static int beats;
static void on_beat(void *ctx)
{
    (void)ctx;
    beats++;
}

int main(void)
{
    char err[512];
    CommStore store = { .ctx = NULL, .set = st_set, .get = st_get };
    CommConfig cc = { .backend = "gloo",
                      .rank = 0,
                      .world = 1,
                      .host = "127.0.0.1",
                      .prefix = "test-reducer",
                      .timeout_ms = 5000,
                      .store = &store };
    Comm *comm = NULL;
    if (comm_new(&comm, &cc, err, sizeof err)) {
        printf("FAIL: tests/unit/test_reducer.c:setup: %s\n", err);
        return 1;
    }
    Reducer *r = NULL;

    TEST_BEGIN("ops_in_order_with_times");
    CHECK(reducer_new(&r, comm, err, sizeof err) == 0, "%s", err);
    float a[100], b[40];
    for (int i = 0; i < 100; i++) a[i] = (float)i;
    for (int i = 0; i < 40; i++) b[i] = 2.0f;
    RedOp op;
    memset(&op, 0, sizeof op);
    op.kind = RED_ALLREDUCE, op.buf = a, op.n = 100, op.tag = 1, op.scale = 0.5f, op.scale_from = 4, op.bucket = 0;
    int64_t id1 = reducer_submit(r, &op, true, err, sizeof err);
    op.buf = b, op.n = 40, op.tag = 2, op.scale = 1.0f, op.scale_from = 0, op.bucket = 1;
    int64_t id2 = reducer_submit(r, &op, true, err, sizeof err);
    op.kind = RED_BARRIER, op.buf = NULL, op.n = 0, op.bucket = -1;
    int64_t id3 = reducer_submit(r, &op, false, err, sizeof err);
    CHECK(id1 == 1 && id2 == 2 && id3 == 3, "ids %lld %lld %lld", (long long)id1, (long long)id2, (long long)id3);
    CHECK(reducer_wait(r, id3, on_beat, NULL, 1000, err, sizeof err) == 0, "%s", err);
    const RedOp *o1 = reducer_op(r, id1), *o2 = reducer_op(r, id2), *o3 = reducer_op(r, id3);
    CHECK(o1 && o2 && o3, "records missing");
    if (o1 && o2 && o3) {
        CHECK(o1->enq_ns <= o1->start_ns && o1->start_ns <= o1->done_ns, "times of op 1 out of order");
        CHECK(o1->done_ns <= o2->start_ns && o2->done_ns <= o3->start_ns, "ops overlapped or ran out of order");
        CHECK(o1->rc == 0 && o2->rc == 0 && o3->rc == 0, "an op failed");
    }
    /* one rank: the sum is the value; the first 4 floats (flags) unscaled */
    CHECK(a[0] == 0.0f && a[3] == 3.0f && a[4] == 2.0f && a[99] == 49.5f, "scaling: %g %g %g %g", a[0], a[3], a[4],
          a[99]);
    CHECK(b[39] == 2.0f, "scale 1 changed the buffer");
    bool busy;
    int64_t fid, since;
    RedKind fk;
    int fbucket;
    busy = reducer_in_flight(r, &fid, &fk, &since, &fbucket);
    CHECK(!busy, "idle reducer says op %lld is in flight", (long long)fid);
    TEST_END();

    TEST_BEGIN("waited_op_runs_on_main_thread");
    /* Not woken: the communication thread sleeps, so the waiting main
     * thread must run it (or this would hang until a later wake). */
    memset(&op, 0, sizeof op);
    op.kind = RED_ALLREDUCE, op.buf = b, op.n = 40, op.tag = 2, op.scale = 1.0f, op.bucket = -1;
    int64_t id4 = reducer_submit(r, &op, false, err, sizeof err);
    CHECK(reducer_wait(r, id4, NULL, NULL, 1000, err, sizeof err) == 0, "%s", err);
    const RedOp *o4 = reducer_op(r, id4);
    CHECK(o4 && o4->inline_run, "the op was not run by the waiting thread");
    TEST_END();

    TEST_BEGIN("failure_poisons_later_ops");
    memset(&op, 0, sizeof op);
    op.kind = RED_BROADCAST, op.buf = b, op.n = 40, op.root = 3, op.scale = 1.0f, op.bucket = -1; /* root 3 of 1 */
    int64_t id5 = reducer_submit(r, &op, true, err, sizeof err);
    op.kind = RED_ALLREDUCE, op.root = 0;
    int64_t id6 = reducer_submit(r, &op, true, err, sizeof err);
    err[0] = 0;
    int rc = reducer_wait(r, id6, NULL, NULL, 1000, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "root 3"), "wait after a failure: rc %d, err \"%s\"", rc, err);
    const RedOp *o6 = reducer_op(r, id6);
    CHECK(o6 && o6->rc == -1, "the op after the failure did not fail");
    memset(&op, 0, sizeof op);
    op.kind = RED_BARRIER, op.scale = 1.0f;
    CHECK(reducer_run(r, &op, NULL, NULL, 1000, err, sizeof err) == -1, "a later barrier succeeded");
    (void)id5;
    TEST_END();

    reducer_free(&r);
    CHECK(r == NULL, "reducer_free left the pointer");
    comm_free(&comm);
    CHECK_EXIT();
}
