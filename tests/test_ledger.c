/* test_ledger.c — the collective ledger keeps the last 256 collectives, and
 * the heartbeat reports the one in flight while the issuing thread is blocked. */
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "check.h"
#include "ledger.h"
#include "zsock.h"

int main(void)
{
    TEST_BEGIN("ledger_states_and_ring");
    Ledger *l = ledger_new();
    CHECK(l != NULL, "ledger_new");
    LedgerEntry e;
    CHECK(ledger_inflight(l, &e) == 0, "nothing in flight at first");
    int64_t a = ledger_enqueue(l, "broadcast", -1, 0, 4096);
    int64_t b = ledger_enqueue(l, "allreduce", 0, 1, 1 << 20);
    CHECK(a == 1 && b == 2, "seqs %lld %lld", (long long)a, (long long)b);
    ledger_start(l, a);
    ledger_finish(l, a, true);
    CHECK(ledger_inflight(l, &e) == 1 && e.seq == 2 && e.state == COLL_ENQUEUED, "oldest unfinished is #2");
    ledger_start(l, b);
    ledger_finish(l, b, false);
    CHECK(ledger_get(l, b, &e) == 0 && e.state == COLL_FAILED && e.done_ns >= e.start_ns, "failed state kept");
    for (int i = 0; i < 300; i++) {
        int64_t s = ledger_enqueue(l, "allreduce", 0, 2 + i, 8);
        ledger_finish(l, s, true);
    }
    CHECK(ledger_get(l, 1, &e) == -1, "entries older than 256 are gone");
    LedgerEntry rec[LEDGER_SIZE + 10];
    int n = ledger_recent(l, rec, LEDGER_SIZE + 10);
    CHECK(n == LEDGER_SIZE && rec[0].seq == 302 && rec[LEDGER_SIZE - 1].seq == 302 - LEDGER_SIZE + 1,
          "recent: %d entries, newest %lld", n, (long long)(n ? rec[0].seq : -1));
    ledger_free(&l);
    CHECK(l == NULL, "free clears the pointer");
    TEST_END();

    TEST_BEGIN("heartbeat_reports_the_collective_in_flight");
    char dir[256], err[256], ep[300];
    CHECK(zs_private_dir(dir, sizeof dir, err, sizeof err) == 0, "%s", err);
    snprintf(ep, sizeof ep, "ipc://%s/tel", dir);
    void *ctx = zmq_ctx_new();
    void *pull = zmq_socket(ctx, ZMQ_PULL);
    CHECK(zmq_bind(pull, ep) == 0, "bind");
    l = ledger_new();
    ledger_set_progress(l, 811, PHASE_TRAIN);
    int64_t s = ledger_enqueue(l, "allreduce", 0, 812, 1 << 20);
    ledger_start(l, s);   /* as if the comm thread were now blocked inside it */
    Heartbeat *hb = NULL;
    CHECK(heartbeat_start(&hb, ctx, ep, 3, l, 50, err, sizeof err) == 0, "%s", err);
    int timeout = 2000;
    zmq_setsockopt(pull, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    Msg m;
    int got = 0;
    for (int i = 0; i < 3; i++) {
        if (zs_recv(pull, &m, 0, err, sizeof err) != 0) break;
        if (m.kind == MSG_BEAT && m.rank == 3 && m.u.beat.coll_seq == s && !strcmp(m.u.beat.coll_op, "allreduce") &&
            m.u.beat.step == 811 && m.u.beat.phase == PHASE_TRAIN && m.u.beat.coll_since_ns > 0)
            got++;
        msg_done(&m);
    }
    CHECK(got == 3, "3 beats naming all-reduce #%lld, got %d", (long long)s, got);
    ledger_finish(l, s, true);
    usleep(150000);
    /* drain, then the next beat says nothing is in flight */
    int none = 0;
    for (int i = 0; i < 10 && !none; i++) {
        if (zs_recv(pull, &m, 0, err, sizeof err) != 0) break;
        if (m.kind == MSG_BEAT && m.u.beat.coll_seq == -1) none = 1;
        msg_done(&m);
    }
    CHECK(none, "a beat after the collective finished says none in flight");
    heartbeat_stop(&hb);
    CHECK(hb == NULL, "stop clears the pointer");
    ledger_free(&l);
    zmq_close(pull);
    zmq_ctx_term(ctx);
    zs_private_dir_remove(dir);
    TEST_END();
    CHECK_EXIT();
}
