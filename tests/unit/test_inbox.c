/* test_inbox.c — what ddptop's receive loop does with a rank's decoded
 * messages (tui/run/inbox.c run_take_msg, run_take_msgs and take_burst):
 * the sender check's every verdict against the process that sent it, and
 * what a verdict does (applied to the job model, kept for viewers, or
 * counted and named). The check answers the usual telemetry without its
 * full walk, and a burst's plain messages go to the model together; these
 * cases pin both to one message at a time. A listen-mode Run as `ddptop
 * listen` builds it (no launcher; bursts through an inproc socket).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "base/clock.h"
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

static void run_init(Run *r, int world)
{
    memset(r, 0, sizeof *r);
    r->external = true;
    r->job = job_new(world, T0);
    r->viewers = viewers_new(world);
    r->rk = calloc((size_t)world, sizeof *r->rk);
}

static void run_done(Run *r)
{
    viewers_free(&r->viewers);
    job_free(&r->job);
    free(r->rk);
}

static void setup(int world) { run_init(&R, world); }
static void teardown(void) { run_done(&R); }

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
    m.u.step.samples = s < ((int64_t)1 << 50) ? 64 * s : s; /* a huge step's count as it is */
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

/* ---- a burst's messages together, against one at a time ---- */

/* What the two runs show that does not hang on the clock (take_burst
 * stamps its own arrival), a's version dversion ahead: the first
 * difference into why. */
static bool runs_differ(const Run *a, const Run *b, uint64_t dversion, char *why, size_t n)
{
    const Job *x = a->job, *y = b->job;
    if (x->version != y->version + dversion || x->step != y->step || x->epoch != y->epoch || x->drops != y->drops ||
        x->ev_total != y->ev_total || x->n_buckets != y->n_buckets || x->loss_all.len != y->loss_all.len) {
        snprintf(why, n, "version %llu/%llu step %lld/%lld events %llu/%llu", (unsigned long long)x->version,
                 (unsigned long long)y->version, (long long)x->step, (long long)y->step,
                 (unsigned long long)x->ev_total, (unsigned long long)y->ev_total);
        return true;
    }
    for (int i = 0; job_event_at(x, i); i++)
        if (strcmp(job_event_at(x, i)->text, job_event_at(y, i)->text)) {
            snprintf(why, n, "event %d: %.80s / %.80s", i, job_event_at(x, i)->text, job_event_at(y, i)->text);
            return true;
        }
    for (int k = 0; k < x->world; k++) {
        const JobRank *p = &x->ranks[k], *q = &y->ranks[k];
        if (memcmp(&p->last, &q->last, sizeof p->last) || p->ring_len != q->ring_len || p->colls_len != q->colls_len ||
            p->phase != q->phase || p->logs_len != q->logs_len || p->have_beat != q->have_beat ||
            p->loss_hist.len != q->loss_hist.len || p->lints != q->lints) {
            snprintf(why, n, "rank %d", k);
            return true;
        }
    }
    if (viewers_reused(a->viewers) != viewers_reused(b->viewers)) {
        snprintf(why, n, "%llu/%llu steps kept in place", (unsigned long long)viewers_reused(a->viewers),
                 (unsigned long long)viewers_reused(b->viewers));
        return true;
    }
    return false;
}

/* A burst of rank `rank`: its messages, kinds chosen by k, each a frame of
 * its own (frames[i]) and decoded (ms[i]). */
static int burst_of(int rank, unsigned k, int64_t *step, int64_t *seq, CodecBuf *frames, Msg *ms, int max)
{
    int n = 0;
    for (unsigned q = k; n < max; q = q * 1103515245u + 12345u) {
        Msg m;
        unsigned what = (q >> 16) % 100;
        if (what < 40) {
            m = step_msg(rank, ++*step, what == 7 ? 1u << 30 : 0); /* now and then drops no worker sends */
            m.u.step.loss = what == 8 ? NAN : 1.0 / (double)*step;
        } else if (what < 85) {
            m = kind_msg(MSG_COLL, rank);
            if (what == 84) snprintf(m.u.coll.op, sizeof m.u.coll.op, "broadcast"); /* a desync, told once */
            m.u.coll.seq = ++*seq;
            m.u.coll.bucket = 0;
            m.u.coll.step = *step;
            m.u.coll.enq_ns = WALL - 2 * MS;
            m.u.coll.done_ns = WALL;
        } else if (what < 92) {
            m = kind_msg(MSG_BEAT, rank);
            m.u.beat.step = *step;
        } else if (what < 96) {
            m = kind_msg(MSG_PHASE, rank);
            m.u.phase.phase = what % 2 ? PHASE_CHECKPOINT : PHASE_TRAIN;
        } else {
            m = kind_msg(MSG_LOG, rank);
            snprintf(m.u.log.text, sizeof m.u.log.text, "line %u", q % 1000);
        }
        char err[160];
        if (codec_encode(&m, &frames[n], err, sizeof err) ||
            codec_decode(frames[n].data, frames[n].len, &ms[n], err, sizeof err)) {
            CHECK(false, "codec: %s", err);
            return n;
        }
        n++;
        if ((q >> 8) % 11 == 0) break;
    }
    return n;
}

/* run_take_msgs (a burst's messages, the plain ones to the model together)
 * leaves the job model, the refusals and the viewers' snapshot as
 * run_take_msg on each in turn: bursts of 1-40 (past the 16 taken at
 * once) of steps, collectives, beats, phases, logs, steps with drops no
 * worker sends in the middle. */
static void test_msgs_as_one_at_a_time(void)
{
    TEST_BEGIN("a_bursts_messages_together_as_one_at_a_time");
    enum { WORLD = 3, MAXB = 40 };
    Run a, b;
    run_init(&a, WORLD);
    run_init(&b, WORLD);
    static CodecBuf frames[MAXB];
    static Msg ms[MAXB];
    for (int k = 0; k < MAXB; k++) codec_buf_init(&frames[k]);
    int64_t step[WORLD] = { 0 }, seq[WORLD] = { 0 };
    unsigned seed = 5;
    int bad = 0, msgs = 0;
    char why[200];
    for (int f = 0; f < 600 && bad < 3; f++) {
        seed = seed * 1103515245u + 12345u;
        int r = (int)((seed >> 4) % WORLD),
            n = burst_of(r, seed, &step[r], &seq[r], frames, ms, 1 + (int)(seed % MAXB));
        const void *fp[MAXB];
        size_t lens[MAXB];
        for (int i = 0; i < n; i++) {
            fp[i] = frames[i].data;
            lens[i] = frames[i].len;
        }
        now += (int64_t)(seed % 4) * 20 * MS;
        int refused_a = run_take_msgs(&a, PID, fp, lens, ms, n, now, WALL), refused_b = 0;
        for (int i = 0; i < n; i++) refused_b += run_take_msg(&b, NULL, 0, PID, fp[i], lens[i], &ms[i], now, WALL) != 0;
        for (int i = 0; i < n; i++) msg_done(&ms[i]);
        msgs += n;
        if (refused_a != refused_b || runs_differ(&a, &b, 0, why, sizeof why) || a.refused_frames != b.refused_frames ||
            a.job->bad_frames != b.job->bad_frames || !(a.job->samples_per_s == b.job->samples_per_s)) {
            bad++;
            CHECK(false, "burst %d (%d messages): refused %d/%d, %s", f, n, refused_a, refused_b, why);
        }
    }
    CHECK(bad == 0 && msgs > 4000 && a.refused_frames > 10, "%d bad of %d messages, %llu refused", bad, msgs,
          (unsigned long long)a.refused_frames);
    for (int k = 0; k < MAXB; k++) codec_buf_done(&frames[k]);
    run_done(&a);
    run_done(&b);
    TEST_END();
}

/* The plain messages of a burst reach the model before the message after
 * them that is not plain: rank 0's burst of steps 4 and 5 and then an
 * error ("Connection closed by peer") after rank 1 finished at step 4 is
 * the early-exit lint only if steps 4 and 5 were applied first (at step 3
 * rank 0 would be behind rank 1's end). */
static void test_plain_before_the_next(void)
{
    TEST_BEGIN("a_bursts_plain_messages_reach_the_model_before_the_one_after_them");
    setup(2);
    hello(0, PID);
    hello(1, PID);
    Msg m;
    for (int r = 0; r < 2; r++) {
        m = kind_msg(MSG_PHASE, r);
        m.u.phase.phase = PHASE_TRAIN;
        take(&m, NULL, PID);
    }
    for (int s = 1; s <= 4; s++) {
        if (s < 4) {
            m = step_msg(0, s, 0);
            take(&m, NULL, PID);
        }
        m = step_msg(1, s, 0);
        take(&m, NULL, PID);
    }
    m = kind_msg(MSG_PHASE, 1);
    m.u.phase.phase = PHASE_DESTROYED;
    take(&m, NULL, PID);
    CodecBuf frames[3];
    Msg ms[3], src[3];
    const void *fp[3];
    size_t lens[3];
    src[0] = step_msg(0, 4, 0);
    src[1] = step_msg(0, 5, 0);
    src[2] = kind_msg(MSG_PHASE, 0);
    src[2].u.phase.phase = PHASE_ERROR;
    snprintf(src[2].u.phase.detail, sizeof src[2].u.phase.detail, "allreduce: Connection closed by peer");
    char err[160];
    for (int i = 0; i < 3; i++) {
        codec_buf_init(&frames[i]);
        codec_encode(&src[i], &frames[i], err, sizeof err);
        codec_decode(frames[i].data, frames[i].len, &ms[i], err, sizeof err);
        fp[i] = frames[i].data;
        lens[i] = frames[i].len;
    }
    CHECK(run_take_msgs(&R, PID, fp, lens, ms, 3, now += MS, WALL) == 0, "the burst refused");
    CHECK(R.job->ranks[0].last.step == 5 && (R.job->ranks[0].lints & JOB_LINT_EARLY),
          "rank 0 at step %lld, lints %#x: its error judged before its steps", (long long)R.job->ranks[0].last.step,
          R.job->ranks[0].lints);
    for (int i = 0; i < 3; i++) {
        msg_done(&ms[i]);
        codec_buf_done(&frames[i]);
    }
    teardown();
    TEST_END();
}

/* A real burst frame through run_drain (tel on an inproc socket), as
 * take_burst takes it apart: decoded 16 messages at a time, a message that
 * does not decode counted bad, one of another rank refused, the rest as
 * each one alone would be. */
static void test_burst_frames(void)
{
    TEST_BEGIN("burst_frames_taken_apart_as_their_messages_one_at_a_time");
    enum { WORLD = 3, MAXB = 40 };
    Run a, b;
    run_init(&a, WORLD);
    run_init(&b, WORLD);
    void *ctx = zmq_ctx_new(), *pull = zmq_socket(ctx, ZMQ_PULL), *push = zmq_socket(ctx, ZMQ_PUSH);
    int zero = 0;
    zmq_setsockopt(push, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(pull, ZMQ_LINGER, &zero, sizeof zero);
    CHECK(zmq_bind(pull, "inproc://test-inbox-tel") == 0 && zmq_connect(push, "inproc://test-inbox-tel") == 0,
          "inproc");
    a.tel = pull;
    static CodecBuf frames[MAXB];
    static Msg ms[MAXB];
    CodecBuf burst, other;
    codec_buf_init(&burst);
    for (int k = 0; k < MAXB; k++) codec_buf_init(&frames[k]);
    int64_t step[WORLD] = { 0 }, seq[WORLD] = { 0 };
    unsigned seed = 9;
    int bad = 0, junk = 0, foreign = 0;
    char err[160], why[200];
    /* a refusal in both first: only the first is named in the events, and
     * a burst's refusal of another rank's message says so otherwise */
    Msg m = step_msg(0, 1, UINT32_MAX);
    codec_buf_init(&other);
    for (Run *x = &a; x; x = x == &a ? &b : NULL) {
        char e2[160];
        Msg d;
        codec_encode(&m, &other, e2, sizeof e2);
        codec_decode(other.data, other.len, &d, e2, sizeof e2);
        CHECK(run_take_msg(x, NULL, 0, 0, other.data, other.len, &d, now, WALL) == -1, "drops no worker sends taken");
        msg_done(&d);
    }
    for (int f = 0; f < 200 && bad < 3; f++) {
        seed = seed * 1103515245u + 12345u;
        int r = (int)((seed >> 4) % WORLD),
            n = burst_of(r, seed, &step[r], &seq[r], frames, ms, 1 + (int)(seed % MAXB));
        codec_burst_begin(&burst, r, err, sizeof err);
        int junk_at = f % 5 == 1 ? (int)(seed % (unsigned)n) : -1,
            foreign_at = f % 7 == 3 ? (int)(seed % (unsigned)n) : -1;
        for (int i = 0; i < n; i++) {
            if (i == junk_at) codec_burst_add(&burst, "\xc1\xc1\xc1", 3, err, sizeof err); /* no msgpack at all */
            if (i == foreign_at) {
                Msg o = step_msg((r + 1) % WORLD, 1, 0); /* another rank's, inside r's burst */
                codec_encode(&o, &other, err, sizeof err);
                codec_burst_add(&burst, other.data, other.len, err, sizeof err);
            }
            codec_burst_add(&burst, frames[i].data, frames[i].len, err, sizeof err);
        }
        codec_burst_finish(&burst, WALL);
        junk += junk_at >= 0;
        foreign += foreign_at >= 0;
        CHECK(zmq_send(push, burst.data, burst.len, 0) == (int)burst.len, "send");
        run_drain(&a, mono_ms() + 10000);
        for (int i = 0; i < n; i++) {
            run_take_msg(&b, NULL, 0, 0, frames[i].data, frames[i].len, &ms[i], now += MS, WALL);
            msg_done(&ms[i]);
        }
        /* each junk message and each other rank's: a bad frame, a version */
        uint64_t extra = (uint64_t)(junk + foreign);
        if (runs_differ(&a, &b, extra, why, sizeof why) || a.job->bad_frames != b.job->bad_frames + extra ||
            a.refused_frames != b.refused_frames + (uint64_t)foreign) {
            bad++;
            CHECK(false, "burst %d (%d messages%s%s): bad %llu/%llu refused %llu/%llu %s", f, n,
                  junk_at >= 0 ? ", junk" : "", foreign_at >= 0 ? ", another rank's" : "",
                  (unsigned long long)a.job->bad_frames, (unsigned long long)b.job->bad_frames,
                  (unsigned long long)a.refused_frames, (unsigned long long)b.refused_frames, why);
        }
    }
    CHECK(junk > 20 && foreign > 20 && a.refused_frames > (uint64_t)foreign + 3,
          "%d junk, %d of another rank, %llu refused", junk, foreign, (unsigned long long)a.refused_frames);
    CHECK(bad == 0, "%d bursts differ", bad);
    for (int k = 0; k < MAXB; k++) codec_buf_done(&frames[k]);
    codec_buf_done(&burst);
    codec_buf_done(&other);
    zmq_close(push);
    zmq_close(pull);
    zmq_ctx_term(ctx);
    a.tel = NULL;
    run_done(&a);
    run_done(&b);
    TEST_END();
}

int main(void)
{
    codec_buf_init(&buf);
    test_verdicts();
    test_ctl();
    test_msgs_as_one_at_a_time();
    test_plain_before_the_next();
    test_burst_frames();
    codec_buf_done(&buf);
    CHECK_EXIT();
}
