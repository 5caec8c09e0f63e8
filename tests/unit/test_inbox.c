/* test_inbox.c — what ddptop's receive loop does with a rank's decoded
 * message (tui/run/inbox.c run_take_msg, the body of take_burst's loop):
 * the sender check's every verdict against the process that sent it, and
 * what a verdict does (applied to the job model, kept for viewers, or
 * counted and named). The check answers the usual telemetry without its
 * full walk; these cases pin that answer to the full one's. A listen-mode
 * Run as `ddptop listen` builds it (no sockets, no launcher).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/job.h"
#include "run/internal.h"
#include "wire/codec.h"

#define MS   1000000LL
#define T0   (1000 * 1000 * MS)
#define WALL (1700000000LL * 1000 * MS)
#define PID  4242

static Run R;
static CodecBuf buf;
static int64_t now = T0;

static void setup(int world)
{
    memset(&R, 0, sizeof R);
    R.external = true;
    R.job = job_new(world, T0);
    R.viewers = viewers_new(world);
    R.rk = calloc((size_t)world, sizeof *R.rk);
}

static void teardown(void)
{
    viewers_free(&R.viewers);
    job_free(&R.job);
    free(R.rk);
}

/* m as the wire brings it (encoded, decoded), taken from pid (ident NULL:
 * telemetry) or on ctl from ident. */
static int take(Msg *m, const char *ident, int64_t pid)
{
    char err[160];
    Msg d;
    if (codec_encode(m, &buf, err, sizeof err) || codec_decode(buf.data, buf.len, &d, err, sizeof err)) {
        CHECK(false, "codec: %s", err);
        return -2;
    }
    int rc = run_take_msg(&R, ident, ident ? strlen(ident) : 0, pid, buf.data, buf.len, &d, now += MS, WALL);
    msg_done(&d);
    return rc;
}

static Msg step_msg(int rank, int64_t s, uint64_t drops)
{
    Msg m;
    msg_init(&m, MSG_STEP);
    m.rank = rank;
    m.u.step.step = s;
    m.u.step.samples = 64 * s;
    m.u.step.loss = 1.0;
    m.u.step.drops = drops;
    return m;
}

static Msg kind_msg(MsgKind k, int rank)
{
    Msg m;
    msg_init(&m, k);
    m.rank = rank;
    if (k == MSG_COLL) snprintf(m.u.coll.op, sizeof m.u.coll.op, "allreduce");
    return m;
}

static void hello(int rank, int64_t pid)
{
    Msg m;
    msg_init(&m, MSG_HELLO);
    m.rank = rank;
    m.u.hello.pid = pid;
    m.u.hello.world = R.job->world;
    char ident[32];
    snprintf(ident, sizeof ident, "rank-%d", rank);
    CHECK(take(&m, ident, pid) == 0, "rank %d's hello refused", rank);
}

/* Each verdict the check gives a rank's telemetry, and what follows it. */
static void test_verdicts(void)
{
    TEST_BEGIN("sender_check_verdicts_and_what_they_do");
    setup(4);
    hello(0, PID);
    hello(1, PID + 1);
    R.rk[1].prev_pid = PID + 7; /* rank 1 before a restart */
    Msg m = step_msg(0, 1, 0);
    CHECK(take(&m, NULL, PID) == 0 && R.job->ranks[0].have_step && R.job->ranks[0].last.step == 1,
          "rank 0's step from its process not applied");
    m = kind_msg(MSG_COLL, 0);
    m.u.coll.seq = 1;
    CHECK(take(&m, NULL, PID) == 0 && R.job->ranks[0].have_coll, "rank 0's coll not applied");
    m = kind_msg(MSG_BEAT, 0);
    CHECK(take(&m, NULL, PID) == 0 && R.job->ranks[0].have_beat, "rank 0's beat not applied");
    m = step_msg(0, 2, 0);
    CHECK(take(&m, NULL, 0) == 0 && R.job->ranks[0].last.step == 2, "a step from a process unnamed not applied");
    CHECK(R.job->bad_frames == 0 && R.refused_frames == 0, "bad %llu refused %llu after good frames",
          (unsigned long long)R.job->bad_frames, (unsigned long long)R.refused_frames);
    CHECK(R.rk[0].heard_ms == now / MS, "listen: rank 0 heard at %lld, not at its last frame",
          (long long)R.rk[0].heard_ms);

    /* another process's: refused, counted, named once, not applied */
    uint64_t version = R.job->version;
    m = step_msg(0, 3, 0);
    CHECK(take(&m, NULL, PID + 1) == -1, "rank 0's step from rank 1's process taken");
    CHECK(R.job->ranks[0].last.step == 2 && R.job->bad_frames == 1 && R.refused_frames == 1,
          "a foreign step: applied (step %lld) or not counted (bad %llu)", (long long)R.job->ranks[0].last.step,
          (unsigned long long)R.job->bad_frames);
    const JobEvent *e = job_event_at(R.job, 0);
    CHECK(e && strstr(e->text, "dropped a step claiming rank 0 from process 4243"), "event: %s", e ? e->text : "none");
    CHECK(R.job->version > version, "a refusal did not move the version");
    m = kind_msg(MSG_COLL, 0);
    CHECK(take(&m, NULL, PID + 1) == -1 && R.refused_frames == 2, "a foreign coll taken");
    m = kind_msg(MSG_BEAT, 0);
    CHECK(take(&m, NULL, PID + 1) == -1 && R.refused_frames == 3, "a foreign beat taken");

    /* the process rank 1 was before its restart: dropped without a word */
    uint64_t bad = R.job->bad_frames;
    m = step_msg(1, 5, 0);
    CHECK(take(&m, NULL, PID + 7) == -1 && !R.job->ranks[1].have_step, "a stale step applied");
    CHECK(R.job->bad_frames == bad && R.refused_frames == 3, "a stale step counted");

    /* drops no worker sends: (step + 1) * 65536 is the most a step may say */
    m = step_msg(1, 9, 10 * 65536);
    CHECK(take(&m, NULL, PID + 1) == 0 && R.job->ranks[1].last.step == 9, "drops at the cap refused");
    m = step_msg(1, 10, 11 * 65536 + 1);
    CHECK(take(&m, NULL, PID + 1) == -1 && R.job->ranks[1].last.step == 9 && R.refused_frames == 4,
          "drops past the cap taken");
    m = step_msg(1, -1, 0);
    CHECK(take(&m, NULL, PID + 1) == -1 && R.refused_frames == 5, "a negative step taken");
    m = step_msg(1, 11, 0);
    m.u.step.samples = -5;
    CHECK(take(&m, NULL, PID + 1) == -1 && R.refused_frames == 6, "negative samples taken");
    m = step_msg(1, (int64_t)1 << 60, ((uint64_t)1 << 61) - 1); /* a step past 2^48: no count of drops is too many */
    CHECK(take(&m, NULL, PID + 1) == 0, "a huge step's drops refused");

    /* a rank no hello named (listen: no pid known): any process may speak for it */
    m = step_msg(2, 1, 0);
    CHECK(take(&m, NULL, PID + 99) == 0 && R.job->ranks[2].have_step, "rank 2 (no hello) refused");
    /* a rank outside the world: not the check's to refuse, the model counts it */
    bad = R.job->bad_frames;
    m = kind_msg(MSG_COLL, 9);
    CHECK(take(&m, NULL, PID) == 0 && R.job->bad_frames == bad + 1, "rank 9 of 4: bad %llu",
          (unsigned long long)R.job->bad_frames);
    /* an eval is rank 0's: rank 1's is implausible */
    m = kind_msg(MSG_EVAL, 1);
    m.u.eval.total = 10;
    m.u.eval.correct = 5;
    m.u.eval.accuracy = 0.5;
    CHECK(take(&m, NULL, PID + 1) == -1 && R.refused_frames == 7, "rank 1's eval taken");
    teardown();
    TEST_END();
}

/* On ctl (a routing id, no pid), a rank's own id is checked, not a pid. */
static void test_ctl(void)
{
    TEST_BEGIN("ctl_messages_checked_by_routing_id");
    setup(2);
    hello(0, PID);
    Msg m = step_msg(0, 1, 0);
    CHECK(take(&m, "rank-0", 0) == 0 && R.job->ranks[0].last.step == 1, "rank 0's step on ctl refused");
    m = step_msg(0, 2, 0);
    CHECK(take(&m, "rank-1", 0) == -1 && R.job->ranks[0].last.step == 1 && R.refused_frames == 1,
          "rank 0's step from rank-1's routing id taken");
    m = kind_msg(MSG_BEAT, 0);
    CHECK(take(&m, "rank-1", 0) == -1 && R.refused_frames == 2, "rank 0's beat from rank-1 taken");
    teardown();
    TEST_END();
}

int main(void)
{
    codec_buf_init(&buf);
    test_verdicts();
    test_ctl();
    codec_buf_done(&buf);
    CHECK_EXIT();
}
