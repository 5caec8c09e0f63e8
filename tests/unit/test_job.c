/* test_job.c — the job model driven by hand-built messages: phases and job
 * state, step minimum, samples/s, collectives, shards, checkpoints, exits
 * and verdicts, bad ranks, the events ring; pause outcomes, evals, the
 * straggler of a collective and who it waits for, buckets, the sampler's
 * index map and the set_epoch check, min/median/max, outliers and orders,
 * decimated series. No sockets, no terminal.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "check.h"
#include "base/utf8.h"
#include "model/job.h"

#define MS   1000000LL
#define SEC  1000000000LL
/* The tests' clocks: a job starts at T0 (monotonic); wall time stands
 * still at WALL, which only stamps events. */
#define T0   (1000 * SEC)
#define WALL (1700000000LL * SEC)

/* ---- message builders ---- */

static void send_hello(Job *j, int rank, int64_t pid, int64_t t)
{
    Msg m;
    msg_init(&m, MSG_HELLO);
    m.rank = rank;
    m.u.hello.world = j->world;
    m.u.hello.pid = pid;
    snprintf(m.u.hello.host, sizeof m.u.hello.host, "node%d", rank);
    snprintf(m.u.hello.device, sizeof m.u.hello.device, "cpu");
    snprintf(m.u.hello.backend, sizeof m.u.hello.backend, "gloo");
    snprintf(m.u.hello.dataset, sizeof m.u.hello.dataset, "fashion-mnist");
    snprintf(m.u.hello.model, sizeof m.u.hello.model, "mlp:784,256,256,10");
    m.u.hello.params = 269322;
    m.u.hello.batch_size = 64;
    m.u.hello.max_steps = 938;
    m.u.hello.steps_per_epoch = 469;
    m.u.hello.dataset_size = 60000;
    job_apply(j, &m, t, WALL);
}

static void send_phase(Job *j, int rank, Phase p, const char *detail, int64_t t)
{
    Msg m;
    msg_init(&m, MSG_PHASE);
    m.rank = rank;
    m.u.phase.phase = p;
    if (detail) snprintf(m.u.phase.detail, sizeof m.u.phase.detail, "%s", detail);
    job_apply(j, &m, t, WALL);
}

static void send_step(Job *j, int rank, int64_t epoch, int64_t step, double loss, int64_t t)
{
    Msg m;
    msg_init(&m, MSG_STEP);
    m.rank = rank;
    m.u.step.epoch = epoch;
    m.u.step.step = step;
    m.u.step.loss = loss;
    m.u.step.samples = step * 64;
    m.u.step.step_ms = 10;
    m.u.step.comm_ms = 2.5;
    job_apply(j, &m, t, WALL);
}

static void send_bye(Job *j, int rank, int status, int64_t step, int64_t t)
{
    Msg m;
    msg_init(&m, MSG_BYE);
    m.rank = rank;
    m.u.bye.status = status;
    m.u.bye.step = step;
    job_apply(j, &m, t, WALL);
}

/* Is there an event (any age still kept) whose text contains s? */
static const JobEvent *find_event(const Job *j, const char *s)
{
    for (int i = 0; job_event_at(j, i); i++)
        if (strstr(job_event_at(j, i)->text, s)) return job_event_at(j, i);
    return NULL;
}

/* Two ranks through launch, hello and the phases up to training. */
static Job *started_job(int64_t *t)
{
    Job *j = job_new(2, T0);
    *t = j->start_ns;
    for (int r = 0; r < 2; r++) job_rank_started(j, r, 1000 + r, *t);
    for (int r = 0; r < 2; r++) send_hello(j, r, 1000 + r, *t += MS);
    Phase ps[] = { PHASE_INIT, PHASE_RENDEZVOUS, PHASE_BROADCAST, PHASE_TRAIN };
    for (unsigned i = 0; i < sizeof ps / sizeof ps[0]; i++)
        for (int r = 0; r < 2; r++) send_phase(j, r, ps[i], NULL, *t += MS);
    return j;
}

static void test_new_free(void)
{
    TEST_BEGIN("new_free");
    CHECK(job_new(0, T0) == NULL, "world 0 accepted");
    CHECK(job_new(JOB_MAX_RANKS + 1, T0) == NULL, "world above max accepted");
    Job *j = job_new(3, T0);
    CHECK(j && j->world == 3 && j->state == JOB_STARTING, "bad new job");
    CHECK(j && job_event_at(j, 0) == NULL && job_event_nth(j, 0) == NULL, "events in a new job");
    job_free(&j);
    CHECK(j == NULL, "job_free left the pointer");
    job_free(&j); /* twice is harmless */
    job_free(NULL);
    TEST_END();
}

/* A torch script's hello names no model or data; its infos do, later and
 * in parts (the model at DDP, the data at the first batch), and each field
 * is taken once: a hello's fields (the built-in trainer's) are not
 * overwritten, nor the first rank's by another's. */
static void test_info(void)
{
    TEST_BEGIN("info_fills_what_the_hello_did_not_say");
    Job *j = job_new(2, T0);
    int64_t t = T0;
    Msg m;
    for (int r = 0; r < 2; r++) {
        msg_init(&m, MSG_HELLO);
        m.rank = r;
        m.u.hello.world = 2;
        m.u.hello.pid = 100 + r;
        job_apply(j, &m, t += MS, WALL);
    }
    CHECK(!j->model[0] && !j->dataset[0] && j->params == 0, "a script's hello said a model");
    msg_init(&m, MSG_INFO);
    m.rank = 1;
    snprintf(m.u.info.model, sizeof m.u.info.model, "Sequential");
    m.u.info.params = 101770;
    job_apply(j, &m, t += MS, WALL);
    CHECK(!strcmp(j->model, "Sequential") && j->params == 101770 && !j->dataset[0], "model '%s' %lld, data '%s'",
          j->model, (long long)j->params, j->dataset);
    snprintf(m.u.info.dataset, sizeof m.u.info.dataset, "TensorDataset");
    m.u.info.dataset_size = 60000, m.u.info.batch_size = 64;
    job_apply(j, &m, t += MS, WALL);
    CHECK(!strcmp(j->dataset, "TensorDataset") && j->dataset_size == 60000 && j->batch_size == 64, "data '%s' %lld %lld",
          j->dataset, (long long)j->dataset_size, (long long)j->batch_size);
    msg_init(&m, MSG_INFO); /* another rank, another story: the first one told stays */
    m.rank = 0;
    snprintf(m.u.info.model, sizeof m.u.info.model, "Other");
    m.u.info.params = 5;
    job_apply(j, &m, t += MS, WALL);
    CHECK(!strcmp(j->model, "Sequential") && j->params == 101770, "overwritten: '%s' %lld", j->model,
          (long long)j->params);
    job_free(&j);

    j = job_new(1, T0); /* no process group: the data's info before the hello, which says none */
    msg_init(&m, MSG_INFO);
    m.rank = 0;
    snprintf(m.u.info.dataset, sizeof m.u.info.dataset, "MNIST");
    m.u.info.dataset_size = 60000;
    job_apply(j, &m, t += MS, WALL);
    msg_init(&m, MSG_HELLO);
    m.rank = 0;
    m.u.hello.world = 1;
    m.u.hello.pid = 100;
    job_apply(j, &m, t += MS, WALL);
    CHECK(!strcmp(j->dataset, "MNIST") && j->dataset_size == 60000, "the hello erased the info: '%s' %lld", j->dataset,
          (long long)j->dataset_size);
    job_free(&j);

    j = job_new(1, T0); /* the built-in trainer's hello said it all */
    send_hello(j, 0, 100, t);
    msg_init(&m, MSG_INFO);
    m.rank = 0;
    snprintf(m.u.info.model, sizeof m.u.info.model, "Sequential");
    m.u.info.params = 7;
    job_apply(j, &m, t += MS, WALL);
    CHECK(!strcmp(j->model, "mlp:784,256,256,10") && j->params == 269322, "the hello's model replaced: '%s'",
          j->model);
    job_free(&j);

    /* a script's ranks restarted by ddptop (--max-restarts): their hellos name
     * no model again while the job knows it from the first run's info; no
     * rank "runs model  (0 params)" */
    j = job_new(2, T0);
    for (int run = 0; run < 2; run++) {
        if (run) job_restart(j, t += MS);
        for (int r = 0; r < 2; r++) {
            msg_init(&m, MSG_HELLO);
            m.rank = r;
            m.u.hello.world = 2;
            m.u.hello.pid = 100 + 10 * run + r;
            job_apply(j, &m, t += MS, WALL);
            if (r == 0 && !run) { /* rank 0's info before rank 1's hello */
                msg_init(&m, MSG_INFO);
                m.rank = 0;
                snprintf(m.u.info.model, sizeof m.u.info.model, "Sequential");
                m.u.info.params = 101770;
                job_apply(j, &m, t += MS, WALL);
            }
        }
    }
    CHECK(!find_event(j, "runs model"), "a hello that names no model was taken for another model");
    CHECK(!strcmp(j->model, "Sequential") && j->params == 101770, "the model forgotten: '%s' %lld", j->model,
          (long long)j->params);
    job_free(&j);
    TEST_END();
}

static void test_clean_run(void)
{
    TEST_BEGIN("clean_run_two_ranks");
    Job *j = job_new(2, T0);
    int64_t t = j->start_ns;
    job_rank_started(j, 0, 1000, t);
    job_rank_started(j, 1, 1001, t);
    send_hello(j, 0, 1000, t += MS);
    CHECK(strcmp(j->model, "mlp:784,256,256,10") == 0 && j->max_steps == 938 && j->params == 269322,
          "job-wide fields not taken from the first hello: model '%s' max %lld", j->model, (long long)j->max_steps);
    CHECK(j->ranks[0].state == RANK_ALIVE && j->ranks[1].state == RANK_WAITING, "rank states after one hello");
    CHECK(find_event(j, "rank 0 hello pid 1000 on node0 (cpu, gloo)"), "hello event missing: '%s'",
          job_event_at(j, 0) ? job_event_at(j, 0)->text : "(none)");
    send_hello(j, 1, 1001, t += MS);
    CHECK(job_alive(j) == 2, "alive %d", job_alive(j));

    Phase ps[] = { PHASE_INIT, PHASE_RENDEZVOUS, PHASE_BROADCAST, PHASE_TRAIN };
    for (int i = 0; i < 4; i++) send_phase(j, 0, ps[i], NULL, t += MS);
    CHECK(j->state == JOB_STARTING, "RUNNING before rank 1 trains: %s", job_state_name(j->state));
    for (int i = 0; i < 3; i++) send_phase(j, 1, ps[i], NULL, t += MS);
    CHECK(find_event(j, "rank 1: rendezvous -> broadcast"), "phase change event missing");
    CHECK(j->ranks[1].phase == PHASE_BROADCAST && j->ranks[1].phase_since_ns == t, "phase/since not kept");
    uint64_t before = j->ev_total;
    send_phase(j, 1, PHASE_BROADCAST, NULL, t += MS); /* repeat: no new event */
    CHECK(j->ev_total == before, "repeated phase made an event");
    send_phase(j, 1, PHASE_TRAIN, NULL, t += MS);
    CHECK(j->state == JOB_RUNNING, "not RUNNING once both train: %s", job_state_name(j->state));

    for (int s = 1; s <= 10; s++)
        for (int r = 0; r < 2; r++) send_step(j, r, 0, s, 2.0 - 0.1 * s - 0.01 * r, t += 5 * MS);
    CHECK(j->step == 10 && j->epoch == 0, "job step %lld", (long long)j->step);
    CHECK(j->ranks[1].ring_len == 10, "ring len %d", j->ranks[1].ring_len);
    const JobStepRec *newest = job_rank_step_at(&j->ranks[1], 0), *oldest = job_rank_step_at(&j->ranks[1], 9);
    CHECK(newest && newest->step == 10 && oldest && oldest->step == 1, "step ring order wrong");
    CHECK(job_rank_step_at(&j->ranks[1], 10) == NULL, "step ring past its end");

    send_phase(j, 0, PHASE_STOPPING, NULL, t += MS);
    CHECK(j->state == JOB_STOPPING, "not STOPPING: %s", job_state_name(j->state));
    for (int r = 0; r < 2; r++) {
        send_phase(j, r, PHASE_DESTROYING, NULL, t += MS);
        send_phase(j, r, PHASE_DESTROYED, NULL, t += MS);
        send_bye(j, r, 0, 10, t += MS);
    }
    CHECK(j->ranks[0].bye && j->ranks[0].bye_status == 0, "bye not kept");
    job_rank_exited(j, 0, 1000, W_EXITCODE(0, 0), NULL, t += MS, WALL);
    CHECK(j->state == JOB_STOPPING, "finished before rank 1 exited: %s", job_state_name(j->state));
    CHECK(!job_all_exited(j), "all exited with rank 1 alive");
    uint64_t v = j->version;
    job_rank_exited(j, 1, 1001, W_EXITCODE(0, 0), NULL, t += MS, WALL);
    CHECK(j->version > v, "version did not move on exit");
    CHECK(j->state == JOB_DONE, "not DONE: %s", job_state_name(j->state));
    CHECK(job_all_exited(j) && job_all_clean(j) && job_alive(j) == 0, "clean predicates");
    CHECK(j->samples_per_s == 0, "samples/s %.1f with every rank gone", j->samples_per_s);
    CHECK(strcmp(j->ranks[1].how_ended, "exit 0") == 0, "how_ended '%s'", j->ranks[1].how_ended);
    const JobEvent *e = find_event(j, "rank 1 (pid 1001) ended: exit 0");
    CHECK(e && e->level == EV_INFO && e->rank == 1, "clean exit event");
    char verdict[256];
    job_verdict(j, verdict, sizeof verdict);
    CHECK(strcmp(verdict, "job done: all 2 ranks ended cleanly") == 0, "verdict '%s'", verdict);
    job_free(&j);
    TEST_END();
}

static void test_step_min(void)
{
    TEST_BEGIN("job_step_is_min_over_ranks");
    Job *j = job_new(3, T0);
    int64_t t = j->start_ns;
    CHECK(j->step == 0, "step before any step message");
    send_step(j, 0, 0, 5, 1.0, t += MS);
    CHECK(j->step == 5, "one rank: %lld", (long long)j->step);
    send_step(j, 1, 0, 3, 1.0, t += MS);
    CHECK(j->step == 3, "min not taken: %lld", (long long)j->step);
    send_step(j, 0, 0, 6, 1.0, t += MS);
    CHECK(j->step == 3, "moved with a rank above the min: %lld", (long long)j->step);
    send_step(j, 1, 0, 6, 1.0, t += MS);
    CHECK(j->step == 6, "min did not follow: %lld", (long long)j->step);
    send_step(j, 2, 1, 7, 1.0, t += MS); /* rank 2 (never stepped before) above min */
    CHECK(j->step == 6 && j->epoch == 0, "step %lld epoch %lld", (long long)j->step, (long long)j->epoch);
    send_step(j, 0, 1, 7, 1.0, t += MS);
    CHECK(j->step == 6, "one rank still at 6: %lld", (long long)j->step);
    send_step(j, 1, 1, 8, 1.0, t += MS);
    CHECK(j->step == 7 && j->epoch == 1, "step %lld epoch %lld", (long long)j->step, (long long)j->epoch);
    send_step(j, 2, 0, 2, 1.0, t += MS); /* backwards (restart) */
    CHECK(j->step == 2 && j->epoch == 0, "backwards step: %lld", (long long)j->step);
    job_free(&j);
    TEST_END();
}

/* A rank's samples/s as the screen read it before it was kept per step: a
 * walk over the newest steps, stopping at a gap of over a second or at the
 * first step a second older than the newest. */
static double rank_rate_walk(const JobRank *r, int64_t now_ns)
{
    const JobStepRec *a = job_rank_step_at(r, 0), *b = NULL;
    int steps = 0;
    if (!a) return 0;
    for (int i = 1; i < r->ring_len; i++) {
        const JobStepRec *x = job_rank_step_at(r, i);
        if (job_rank_step_at(r, i - 1)->t_ns - x->t_ns > SEC) break;
        b = x;
        steps = i;
        if (a->t_ns - x->t_ns >= SEC) break;
    }
    if (!b || a->t_ns <= b->t_ns || a->samples < b->samples) return 0;
    double interval = (double)(a->t_ns - b->t_ns) / steps, quiet = (double)(now_ns - a->t_ns);
    if (quiet > 1e9 && quiet > 3 * interval) return 0;
    return (double)(a->samples - b->samples) * 1e9 / (double)(a->t_ns - b->t_ns);
}

/* The per-rank rate kept as each step lands (O(1) for the screen) agrees
 * with the walk: steady paces, changes of pace, pauses over a second, bursts
 * of steps at one instant, and the ring wrapping. */
static void test_rank_rate_kept(void)
{
    TEST_BEGIN("rank_samples_per_s_kept_per_step_matches_the_walk");
    int64_t t;
    Job *j = started_job(&t);
    unsigned seed = 17;
    int bad = 0, nonzero = 0;
    for (int s = 1; s <= 3000; s++) {
        seed = seed * 1103515245u + 12345u;
        unsigned k = (seed >> 16) % 100;
        /* mostly 10 ms apart, some at the same instant, some slow, a few pauses */
        t += k < 10 ? 0 : k < 80 ? 10 * MS : k < 97 ? 150 * MS : k < 99 ? 1200 * MS : 3 * SEC;
        send_step(j, 0, 0, s, 1.0, t);
        for (int q = 0; q < 3; q++) {
            int64_t now = t + q * 700 * MS;
            double got = job_rank_samples_per_s(&j->ranks[0], now), want = rank_rate_walk(&j->ranks[0], now);
            if (got != want && bad++ < 3) CHECK(false, "step %d (+%d ms): kept %.3f, walk %.3f", s, q * 700, got, want);
            nonzero += want > 0;
        }
    }
    CHECK(bad == 0, "%d of 9000 readings differ", bad);
    CHECK(nonzero > 4000, "only %d readings with a rate: the sequence does not exercise the window", nonzero);
    job_free(&j);
    TEST_END();
}

/* The job's samples/s as it was computed before its window's base was kept
 * from one message to the next: snapshots of the summed counters at least
 * 100 ms apart in a ring of 32, the rate from the newest one at least 2 s
 * old (else the oldest), the old figure kept under half a second. */
typedef struct {
    int64_t t[32], s[32];
    int len, head;
    double rate;
} RateWalk;

static void rate_walk(RateWalk *w, int64_t now, int64_t total)
{
    int newest = (w->head + 31) % 32;
    if (w->len == 0 || now - w->t[newest] >= 100 * MS) {
        w->t[w->head] = now;
        w->s[w->head] = total;
        w->head = (w->head + 1) % 32;
        if (w->len < 32) w->len++;
    }
    int base = -1;
    for (int i = 0; i < w->len; i++) {
        base = (w->head + 31 - i) % 32;
        if (now - w->t[base] >= 2 * SEC) break;
    }
    int64_t dt = now - w->t[base];
    if (dt < SEC / 2) return;
    double r = (double)(total - w->s[base]) * 1e9 / (double)dt;
    w->rate = r > 0 ? r : 0;
}

/* The window's base found from the last message's (O(1) amortised) gives
 * the figure the walk over every snapshot gave: steady paces, bursts at one
 * instant, gaps longer than the window and than the ring, beats alone. */
static void test_samples_per_s_matches_the_walk(void)
{
    TEST_BEGIN("samples_per_s_base_kept_matches_the_walk");
    int64_t t;
    Job *j = started_job(&t);
    RateWalk w = { .len = 0 };
    rate_walk(&w, j->start_ns + MS, 0); /* started_job's first message: the first snapshot */
    int64_t last[2] = { 0, 0 }, step[2] = { 0, 0 };
    unsigned seed = 5;
    int bad = 0, nonzero = 0;
    for (int n = 0; n < 20000; n++) {
        seed = seed * 1103515245u + 12345u;
        unsigned k = (seed >> 16) % 1000;
        t += k < 100 ? 0 : k < 900 ? 5 * MS : k < 990 ? 120 * MS : k < 997 ? 2500 * MS : 4 * SEC;
        int r = (int)((seed >> 8) & 1);
        if (k % 7 == 3) {
            Msg m;
            msg_init(&m, MSG_BEAT);
            m.rank = r;
            job_apply(j, &m, t, WALL);
        } else {
            send_step(j, r, 0, ++step[r], 1.0, t);
            last[r] = step[r] * 64;
        }
        rate_walk(&w, t, last[0] + last[1]);
        if (j->samples_per_s != w.rate && bad++ < 3)
            CHECK(false, "message %d: %.3f samples/s, the walk %.3f", n, j->samples_per_s, w.rate);
        nonzero += w.rate > 0;
    }
    CHECK(bad == 0, "%d of 20000 figures differ", bad);
    CHECK(nonzero > 15000, "only %d figures above 0: the sequence does not exercise the window", nonzero);
    job_free(&j);
    TEST_END();
}

static void test_samples_per_s(void)
{
    TEST_BEGIN("samples_per_s_sliding_window");
    int64_t t;
    Job *j = started_job(&t);
    int64_t t0 = t;
    /* 2 ranks x 64 samples x 10 steps/s = 1280 samples/s */
    for (int s = 1; s <= 40; s++)
        for (int r = 0; r < 2; r++) send_step(j, r, 0, s, 1.0, t0 + s * 100 * MS);
    CHECK(j->samples_per_s > 1280 * 0.95 && j->samples_per_s < 1280 * 1.05, "samples/s %.1f, want ~1280",
          j->samples_per_s);
    /* twice as fast from here: the window forgets the old pace within ~2 s */
    int64_t t1 = t0 + 40 * 100 * MS;
    for (int s = 1; s <= 60; s++)
        for (int r = 0; r < 2; r++) send_step(j, r, 0, 40 + s, 1.0, t1 + s * 50 * MS);
    CHECK(j->samples_per_s > 2560 * 0.95 && j->samples_per_s < 2560 * 1.05, "samples/s %.1f, want ~2560",
          j->samples_per_s);
    /* steps stop, heartbeats go on: the rate falls to zero */
    int64_t t2 = t1 + 60 * 50 * MS;
    for (int k = 1; k <= 30; k++) {
        Msg m;
        msg_init(&m, MSG_BEAT);
        m.rank = k % 2;
        job_apply(j, &m, t2 + k * 100 * MS, WALL);
    }
    CHECK(j->samples_per_s < 1, "samples/s %.1f after steps stopped", j->samples_per_s);
    job_free(&j);
    TEST_END();
}

static void test_coll_shard_ckpt(void)
{
    TEST_BEGIN("coll_shard_ckpt");
    int64_t t;
    Job *j = started_job(&t);
    send_step(j, 1, 0, 1, 1.0, t += MS);
    CHECK(job_rank_allreduce_ms(&j->ranks[1]) == 2.5, "comm_ms fallback %.2f", job_rank_allreduce_ms(&j->ranks[1]));
    Msg m;
    msg_init(&m, MSG_COLL);
    m.rank = 1;
    snprintf(m.u.coll.op, sizeof m.u.coll.op, "allreduce");
    m.u.coll.seq = 7;
    m.u.coll.enq_ns = 1000 * SEC;
    m.u.coll.start_ns = 1000 * SEC + 1 * MS;
    m.u.coll.done_ns = 1000 * SEC + 1 * MS + 1500000; /* 1.5 ms after start */
    job_apply(j, &m, t += MS, WALL);
    const JobCollRec *latest = job_rank_coll_at(&j->ranks[1], 0);
    CHECK(j->ranks[1].have_coll && latest && latest->c.seq == 7, "coll not kept");
    CHECK(latest && latest->ms > 1.499 && latest->ms < 1.501, "coll ms %.3f", latest ? latest->ms : 0);
    CHECK(latest && job_rank_allreduce_ms(&j->ranks[1]) == latest->ms, "allreduce ms not the collective's");

    int64_t idx[40];
    for (int i = 0; i < 40; i++) idx[i] = 1000 - i;
    msg_init(&m, MSG_SHARD);
    m.rank = 0;
    m.u.shard.epoch = 2;
    m.u.shard.num_samples = 30001;
    m.u.shard.total_size = 60002;
    m.u.shard.padding = 2;
    m.u.shard.n_idx = 40;
    m.u.shard.idx = idx; /* borrowed: no msg_done */
    job_apply(j, &m, t += MS, WALL);
    const JobRank *r0 = &j->ranks[0];
    CHECK(r0->have_shard && r0->shard_epoch == 2 && r0->num_samples == 30001 && r0->total_size == 60002 &&
              r0->padding == 2,
          "shard summary");
    CHECK(r0->n_first == JOB_SHARD_FIRST && r0->first_idx[0] == 1000 &&
              r0->first_idx[JOB_SHARD_FIRST - 1] == 1000 - (JOB_SHARD_FIRST - 1),
          "shard first indices: n %d", r0->n_first);

    msg_init(&m, MSG_CKPT);
    m.rank = 0;
    m.u.ckpt.ok = true;
    m.u.ckpt.step = 100;
    m.u.ckpt.ms = 42.4;
    m.u.ckpt.bytes = 3250000;
    snprintf(m.u.ckpt.path, sizeof m.u.ckpt.path, "ckpt/step-00000100");
    job_apply(j, &m, t += MS, WALL);
    CHECK(find_event(j, "checkpoint step 100 written by rank 0 in 42 ms (3.2 MB) -> ckpt/step-00000100") ||
              find_event(j, "checkpoint step 100 written by rank 0 in 42 ms (3.3 MB) -> ckpt/step-00000100"),
          "ckpt event: '%s'", job_event_at(j, 0)->text);
    CHECK(j->last_ckpt_step == 100 && strcmp(j->last_ckpt_path, "ckpt/step-00000100") == 0 && j->ckpts == 1,
          "last ckpt not kept");
    m.u.ckpt.ok = false;
    m.u.ckpt.step = 200;
    snprintf(m.u.ckpt.error, sizeof m.u.ckpt.error, "No space left on device");
    job_apply(j, &m, t += MS, WALL);
    const JobEvent *e = job_event_at(j, 0);
    CHECK(e && e->level == EV_ERROR && strstr(e->text, "200") && strstr(e->text, "No space left on device"),
          "ckpt failure event: '%s'", e ? e->text : "");
    CHECK(j->last_ckpt_step == 100 && j->ckpts == 1, "failed ckpt counted");
    job_free(&j);
    TEST_END();
}

static void test_log_and_error_phase(void)
{
    TEST_BEGIN("log_levels_and_error_phase");
    int64_t t;
    Job *j = started_job(&t);
    const char *lv[] = { "info", "warn", "error" };
    JobEventLevel want[] = { EV_INFO, EV_WARN, EV_ERROR };
    for (int i = 0; i < 3; i++) {
        Msg m;
        msg_init(&m, MSG_LOG);
        m.rank = 1;
        snprintf(m.u.log.level, sizeof m.u.log.level, "%s", lv[i]);
        snprintf(m.u.log.text, sizeof m.u.log.text, "message %d", i);
        job_apply(j, &m, t += MS, WALL);
        char want_text[32];
        snprintf(want_text, sizeof want_text, "message %d", i);
        const JobEvent *e = job_event_at(j, 0);
        CHECK(e && e->level == want[i] && e->rank == 1 && strcmp(e->text, want_text) == 0, "log event %d: '%s'", i,
              e ? e->text : "");
        CHECK(e && e->mono_ns == t, "event time is not the arrival time");
    }
    send_phase(j, 0, PHASE_ERROR, "allreduce: Connection reset by peer", t += MS);
    const JobEvent *e = job_event_at(j, 0);
    CHECK(e && e->level == EV_ERROR && strstr(e->text, "rank 0: train -> error") &&
              strstr(e->text, "Connection reset by peer"),
          "error phase event: '%s'", e ? e->text : "");
    send_phase(j, 0, PHASE_DESTROYING, NULL, t += MS);
    CHECK(strcmp(j->ranks[0].detail, "allreduce: Connection reset by peer") == 0, "error detail lost: '%s'",
          j->ranks[0].detail);
    job_rank_exited(j, 0, 1000, W_EXITCODE(1, 0), NULL, t += MS, WALL);
    char verdict[256];
    job_verdict(j, verdict, sizeof verdict);
    /* nothing but the consequence is known: it is said, and said as one */
    CHECK(strstr(verdict, "job failed: rank 0 exit 1 before its first step") == verdict &&
              strstr(verdict, "Connection reset by peer") && strstr(verdict, "a consequence"),
          "verdict '%s'", verdict);
    job_free(&j);
    TEST_END();
}

static void test_signal_exit(void)
{
    TEST_BEGIN("signal_exit_fails_job");
    int64_t t;
    Job *j = started_job(&t);
    for (int s = 1; s <= 57; s++)
        for (int r = 0; r < 2; r++) send_step(j, r, 0, s, 1.0, t += MS);
    job_rank_exited(j, 1, 1001, W_EXITCODE(0, SIGKILL), NULL, t += MS, WALL);
    const JobRank *r1 = &j->ranks[1];
    CHECK(r1->state == RANK_FAILED, "rank state %s", rank_state_name(r1->state));
    CHECK(strcmp(r1->how_ended, "signal 9 (Killed)") == 0, "how_ended '%s'", r1->how_ended);
    CHECK(j->state == JOB_FAILED, "job %s after a killed rank", job_state_name(j->state));
    CHECK(j->first_failed == 1, "first_failed %d", j->first_failed);
    const JobEvent *e = job_event_at(j, 0);
    CHECK(e && e->level == EV_ERROR && e->rank == 1 && strstr(e->text, "signal 9 (Killed)") &&
              strstr(e->text, "step 57"),
          "exit event: '%s'", e ? e->text : "");
    char verdict[256];
    job_verdict(j, verdict, sizeof verdict);
    CHECK(strcmp(verdict, "job failed: rank 1 signal 9 (Killed) at step 57") == 0, "verdict '%s'", verdict);
    /* the survivor then dies of the broken link: the verdict still names rank 1 */
    job_rank_exited(j, 0, 1000, W_EXITCODE(1, 0), NULL, t += MS, WALL);
    CHECK(j->state == JOB_FAILED, "state moved off FAILED");
    job_verdict(j, verdict, sizeof verdict);
    CHECK(strcmp(verdict, "job failed: rank 1 signal 9 (Killed) at step 57; rank 0 ended: exit 1") == 0,
          "verdict '%s'", verdict);
    job_free(&j);

    j = started_job(&t);
    job_rank_exited(j, 0, 1000, W_EXITCODE(0, SIGTERM), "SIGTERM by ddptop", t += MS, WALL);
    CHECK(strcmp(j->ranks[0].how_ended, "SIGTERM by ddptop") == 0, "how text not used: '%s'", j->ranks[0].how_ended);
    CHECK(strstr(job_event_at(j, 0)->text, "before its first step"), "event '%s'", job_event_at(j, 0)->text);
    job_free(&j);
    TEST_END();
}

/* --no-inject: ranks that never say hello are judged by their exit code;
 * one that did say hello still owes its bye. */
static void test_bare_exits(void)
{
    TEST_BEGIN("bare_exit0_is_clean");
    Job *j = job_new(3, T0);
    j->bare = true;
    int64_t t = j->start_ns;
    for (int r = 0; r < 3; r++) job_rank_started(j, r, 1000 + r, t);
    send_hello(j, 2, 1002, t += MS);
    job_rank_exited(j, 0, 1000, W_EXITCODE(0, 0), NULL, t += MS, WALL);
    CHECK(j->ranks[0].state == RANK_EXITED_OK && !strcmp(j->ranks[0].how_ended, "exit 0"), "bare exit 0: %s '%s'",
          rank_state_name(j->ranks[0].state), j->ranks[0].how_ended);
    job_rank_exited(j, 2, 1002, W_EXITCODE(0, 0), NULL, t += MS, WALL);
    CHECK(j->ranks[2].state == RANK_FAILED && strstr(j->ranks[2].how_ended, "without bye"),
          "a rank that said hello exits 0 without bye: %s '%s'", rank_state_name(j->ranks[2].state),
          j->ranks[2].how_ended);
    job_rank_exited(j, 1, 1001, W_EXITCODE(3, 0), NULL, t += MS, WALL);
    CHECK(j->ranks[1].state == RANK_FAILED && !strcmp(j->ranks[1].how_ended, "exit 3"), "bare exit 3: '%s'",
          j->ranks[1].how_ended);
    CHECK(j->state == JOB_FAILED, "job %s", job_state_name(j->state));
    job_free(&j);

    j = job_new(1, T0);
    j->bare = true;
    job_rank_started(j, 0, 1000, j->start_ns);
    job_rank_exited(j, 0, 1000, W_EXITCODE(0, 0), NULL, j->start_ns + MS, WALL);
    CHECK(j->state == JOB_DONE && job_all_clean(j), "one bare rank, exit 0: job %s", job_state_name(j->state));
    job_free(&j);
    TEST_END();
}

static void test_exit_without_bye(void)
{
    TEST_BEGIN("exit0_without_bye_fails");
    int64_t t;
    Job *j = started_job(&t);
    send_bye(j, 0, 0, 0, t += MS);
    job_rank_exited(j, 0, 1000, W_EXITCODE(0, 0), NULL, t += MS, WALL);
    CHECK(j->ranks[0].state == RANK_EXITED_OK, "rank 0 with bye: %s", rank_state_name(j->ranks[0].state));
    CHECK(j->state != JOB_FAILED, "failed after one clean exit");
    job_rank_exited(j, 1, 1001, W_EXITCODE(0, 0), NULL, t += MS, WALL);
    CHECK(j->ranks[1].state == RANK_FAILED, "exit 0 without bye: %s", rank_state_name(j->ranks[1].state));
    CHECK(j->state == JOB_FAILED, "job %s", job_state_name(j->state));
    CHECK(strstr(j->ranks[1].how_ended, "exit 0") && strstr(j->ranks[1].how_ended, "without bye"), "how_ended '%s'",
          j->ranks[1].how_ended);
    CHECK(job_all_exited(j) && !job_all_clean(j), "predicates");
    job_free(&j);

    /* bye says failure, exit says 0: not clean either */
    j = started_job(&t);
    send_bye(j, 0, 3, 0, t += MS);
    CHECK(job_event_at(j, 0)->level == EV_WARN, "bye with status 3 not flagged");
    job_rank_exited(j, 0, 1000, W_EXITCODE(0, 0), NULL, t += MS, WALL);
    CHECK(j->ranks[0].state == RANK_FAILED && strstr(j->ranks[0].how_ended, "bye status 3"), "bye status 3: %s '%s'",
          rank_state_name(j->ranks[0].state), j->ranks[0].how_ended);
    job_free(&j);

    j = started_job(&t);
    send_bye(j, 1, 0, 0, t += MS);
    job_rank_exited(j, 1, 1001, W_EXITCODE(3, 0), NULL, t += MS, WALL);
    CHECK(strcmp(j->ranks[1].how_ended, "exit 3") == 0 && j->state == JOB_FAILED, "exit 3: '%s'",
          j->ranks[1].how_ended);
    job_free(&j);
    TEST_END();
}

static void test_bad_rank(void)
{
    TEST_BEGIN("out_of_range_rank_is_bad_frame");
    int64_t t;
    Job *j = started_job(&t);
    uint64_t ev = j->ev_total;
    send_hello(j, 2, 4242, t += MS);
    send_step(j, -1, 0, 1, 1.0, t += MS);
    send_phase(j, 99, PHASE_ERROR, "x", t += MS);
    CHECK(j->bad_frames == 3, "bad_frames %llu", (unsigned long long)j->bad_frames);
    CHECK(j->ev_total == ev, "an out-of-range rank made events");
    CHECK(j->step == 0 && j->state == JOB_RUNNING, "an out-of-range rank changed the job");
    /* a store request with no rank is not a bad frame: it is not the model's */
    Msg m;
    msg_init(&m, MSG_GET);
    job_apply(j, &m, t += MS, WALL);
    CHECK(j->bad_frames == 3, "store message counted as bad");
    /* anything from a good rank refreshes its liveness, even an unknown kind */
    msg_init(&m, MSG_UNKNOWN);
    m.rank = 1;
    job_apply(j, &m, t += 7 * SEC, WALL);
    CHECK(j->ranks[1].last_msg_ns == t, "unknown kind did not refresh last_msg_ns");
    CHECK(job_rank_stale(&j->ranks[0], t) && !job_rank_stale(&j->ranks[1], t), "staleness");
    job_free(&j);
    TEST_END();
}

static void test_event_ring(void)
{
    TEST_BEGIN("event_ring_wraps");
    Job *j = job_new(1, T0);
    for (int i = 0; i < JOB_EVENTS + 100; i++) job_event(j, j->start_ns, WALL, i % 3 - 1, EV_INFO, "event %d", i);
    CHECK(j->ev_total == JOB_EVENTS + 100, "ev_total %llu", (unsigned long long)j->ev_total);
    const JobEvent *e = job_event_at(j, 0);
    CHECK(e && strcmp(e->text, "event 611") == 0, "newest '%s'", e ? e->text : "");
    e = job_event_at(j, JOB_EVENTS - 1);
    CHECK(e && strcmp(e->text, "event 100") == 0, "oldest kept '%s'", e ? e->text : "");
    CHECK(job_event_at(j, JOB_EVENTS) == NULL && job_event_at(j, -1) == NULL, "past the ring");
    CHECK(job_event_nth(j, 99) == NULL, "overwritten event returned");
    e = job_event_nth(j, 100);
    CHECK(e && strcmp(e->text, "event 100") == 0, "nth 100 '%s'", e ? e->text : "");
    e = job_event_nth(j, JOB_EVENTS + 99);
    CHECK(e && strcmp(e->text, "event 611") == 0 && e->rank == 611 % 3 - 1, "nth newest");
    CHECK(job_event_nth(j, JOB_EVENTS + 100) == NULL, "nth past the end");
    /* long text is cut, not overflowed */
    char big[2 * JOB_EVENT_TEXT];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    job_event(j, j->start_ns + SEC, WALL + 2 * SEC, -1, EV_WARN, "%s", big);
    CHECK(strlen(job_event_at(j, 0)->text) == sizeof job_event_at(j, 0)->text - 1, "long event not truncated");
    /* an event carries the times its caller gave, on both clocks; so does one
     * a message causes (the model reads no clock: a replay's are the file's) */
    e = job_event_at(j, 0);
    CHECK(e->mono_ns == j->start_ns + SEC && e->t_ns == WALL + 2 * SEC, "event times");
    Msg m;
    msg_init(&m, MSG_BYE);
    m.rank = 0;
    m.u.bye.status = 3;
    job_apply(j, &m, j->start_ns + 5 * SEC, WALL + 7 * SEC);
    e = job_event_at(j, 0);
    CHECK(strstr(e->text, "bye with status 3") && e->mono_ns == j->start_ns + 5 * SEC && e->t_ns == WALL + 7 * SEC,
          "message event times: '%s'", e->text);
    job_free(&j);
    TEST_END();
}

/* The screen's rows: a script that checkpoints every epoch (the phase to
 * checkpoint, the checkpoint, the phase back: three events an epoch, each
 * with its own step and path) keeps one row for each of the three, with
 * the newest text and a count, moved to the newest place; a warning and an
 * error, each said again, stay rows of their own; every event is still in
 * the log (headless, --json); the rows are bounded as the events are. */
static const char *row_text(const Job *j, int i)
{
    const JobEventRow *r = job_event_row_at(j, i);
    return r ? r->e.text : "(none)";
}
static long long row_count(const Job *j, int i)
{
    const JobEventRow *r = job_event_row_at(j, i);
    return r ? (long long)r->count : -1;
}

static void test_event_fold(void)
{
    TEST_BEGIN("event_fold");
    int64_t t;
    Job *j = started_job(&t);
    uint64_t ev0 = j->ev_total;
    int rows0 = job_event_rows(j);
    Msg m;
    const int epochs = 40;
    for (int ep = 1; ep <= epochs; ep++) {
        send_phase(j, 0, PHASE_CHECKPOINT, "periodic", t += MS);
        msg_init(&m, MSG_CKPT);
        m.rank = 0;
        m.u.ckpt.ok = true;
        m.u.ckpt.step = ep * 10;
        m.u.ckpt.ms = ep % 2 ? 3 : 12;
        m.u.ckpt.bytes = ep < 20 ? 90000 : 1100000; /* 90.0 kB, then 1.1 MB */
        /* a path that differs in more than its numbers (a run's name, a tmp file) */
        snprintf(m.u.ckpt.path, sizeof m.u.ckpt.path, "/ck/%c%c/step-%08d", 'a' + ep % 26, 'a' + ep / 26, ep * 10);
        job_apply(j, &m, t += MS, WALL);
        send_phase(j, 0, PHASE_TRAIN, NULL, t += MS);
        if (ep == 5 || ep == 6) /* a warning, twice, among the checkpoints */
            job_event(j, t, WALL, 1, EV_WARN, "rank 1: epoch %d repeats epoch %d's order", ep, ep - 1);
        if (ep == 7) job_event(j, t, WALL, -1, EV_ERROR, "hang: rank 1 waits in barrier #%d", ep);
        if (ep == 8) job_event(j, t, WALL, -1, EV_ERROR, "hang: rank 1 waits in barrier #%d", ep);
    }
    CHECK(j->ev_total - ev0 == (uint64_t)epochs * 3 + 4, "events logged: %llu",
          (unsigned long long)(j->ev_total - ev0));
    /* three rows folded at the newest places, then the error and warning rows, none folded */
    CHECK(job_event_rows(j) == rows0 + 3 + 4, "rows %d, was %d", job_event_rows(j), rows0);
    const JobEventRow *r = job_event_row_at(j, 0);
    CHECK(r && r->count == epochs && r->e.rank == 0 && r->ev == j->ev_total - 1 &&
              !strcmp(r->e.text, "rank 0: checkpoint -> train"),
          "newest row: x%lld '%s'", r ? (long long)r->count : 0, r ? r->e.text : "");
    r = job_event_row_at(j, 1);
    CHECK(r && r->count == epochs && strstr(r->e.text, "checkpoint step 400 written by rank 0") &&
              strstr(r->e.text, "/ck/ob/step-00000400"),
          "checkpoint row: x%lld '%s'", r ? (long long)r->count : 0, r ? r->e.text : "");
    r = job_event_row_at(j, 2);
    CHECK(r && r->count == epochs && !strcmp(r->e.text, "rank 0: train -> checkpoint (periodic)"),
          "phase row: x%lld '%s'", r ? (long long)r->count : 0, r ? r->e.text : "");
    const char *want[4] = { "barrier #8", "barrier #7", "epoch 6 repeats", "epoch 5 repeats" };
    for (int i = 0; i < 4; i++) {
        r = job_event_row_at(j, 3 + i);
        CHECK(r && r->count == 1 && strstr(r->e.text, want[i]), "row %d: x%lld '%s', want '%s'", 3 + i,
              r ? (long long)r->count : 0, r ? r->e.text : "", want[i]);
    }
    /* the log keeps every one of them, in order */
    CHECK(strstr(job_event_nth(j, ev0 + 1)->text, "checkpoint step 10 written") &&
              strstr(job_event_at(j, 1)->text, "checkpoint step 400 written"),
          "the log lost a checkpoint");
    /* another rank's same event, and another kind of phase, are rows of their own */
    send_phase(j, 1, PHASE_CHECKPOINT, "periodic", t += MS);
    send_phase(j, 0, PHASE_CHECKPOINT, "final: stop", t += MS);
    CHECK(row_count(j, 0) == 1 && row_count(j, 1) == 1 && job_event_row_at(j, 1)->e.rank == 1 &&
              job_event_rows(j) == rows0 + 9,
          "rank 1's or a final checkpoint folded: rows %d", job_event_rows(j));
    /* an event rewritten in place (a hang's report as it grows) is rewritten in its row */
    job_event(j, t, WALL, -1, EV_ERROR, "hang: rank 0 waits");
    uint64_t n = j->ev_total - 1;
    send_phase(j, 0, PHASE_TRAIN, NULL, t += MS);
    job_event_update(j, n, EV_ERROR, "hang: rank 0 waits for rank 1 in barrier #9");
    CHECK(!strcmp(row_text(j, 1), "hang: rank 0 waits for rank 1 in barrier #9"), "row not rewritten: '%s'",
          row_text(j, 1));
    /* far apart (more than JOB_FOLD_RECENT rows between): no fold, the order stays readable */
    for (int i = 0; i < JOB_FOLD_RECENT; i++) job_event(j, t, WALL, -1, EV_WARN, "warning %d", i);
    send_phase(j, 0, PHASE_CHECKPOINT, "periodic", t += MS);
    CHECK(row_count(j, 0) == 1, "folded into a row %d rows back", JOB_FOLD_RECENT + 2);
    /* bounded: the rows are a ring as the events are */
    for (int i = 0; i < 3 * JOB_EVENTS; i++) job_event(j, t, WALL, i % 2, EV_WARN, "w %d", i);
    CHECK(job_event_rows(j) == JOB_EVENTS && job_event_row_at(j, JOB_EVENTS) == NULL &&
              !strcmp(row_text(j, JOB_EVENTS - 1), "w 1024"),
          "rows %d, oldest '%s'", job_event_rows(j), row_text(j, JOB_EVENTS - 1));
    for (int i = 0; i < 3 * JOB_EVENTS; i++) job_event(j, t, WALL, 0, EV_INFO, "saved step %d", i);
    CHECK(job_event_rows(j) == JOB_EVENTS && row_count(j, 0) == 3 * JOB_EVENTS && !strcmp(row_text(j, 1), "w 1535"),
          "a folded flood: rows %d, newest x%lld", job_event_rows(j), row_count(j, 0));
    job_free(&j);
    TEST_END();
}

static void test_state_edges(void)
{
    TEST_BEGIN("stopping_and_hello_mismatch");
    int64_t t;
    Job *j = started_job(&t);
    job_set_stopping(j);
    CHECK(j->state == JOB_STOPPING, "set_stopping: %s", job_state_name(j->state));
    job_free(&j);

    j = job_new(2, T0);
    t = j->start_ns;
    send_hello(j, 0, 10, t += MS);
    Msg m;
    msg_init(&m, MSG_HELLO);
    m.rank = 1;
    m.u.hello.world = 4;
    snprintf(m.u.hello.model, sizeof m.u.hello.model, "mlp:784,10");
    m.u.hello.params = 7850;
    job_apply(j, &m, t += MS, WALL);
    CHECK(strcmp(j->model, "mlp:784,256,256,10") == 0, "second hello overwrote the job's model");
    CHECK(find_event(j, "says world size 4") && find_event(j, "runs model mlp:784,10"), "mismatch warnings missing");
    /* a job that already failed stays failed */
    job_rank_exited(j, 0, 10, W_EXITCODE(0, SIGSEGV), NULL, t += MS, WALL);
    job_set_stopping(j);
    send_phase(j, 1, PHASE_STOPPING, NULL, t += MS);
    CHECK(j->state == JOB_FAILED, "FAILED overwritten by %s", job_state_name(j->state));
    CHECK(strstr(j->ranks[0].how_ended, "signal 11"), "how '%s'", j->ranks[0].how_ended);
    job_free(&j);
    TEST_END();
}

/* ---- added with the TUI panels ---- */

static void send_step_ms(Job *j, int rank, int64_t step, double loss, double step_ms, int64_t t)
{
    Msg m;
    msg_init(&m, MSG_STEP);
    m.rank = rank;
    m.u.step.step = step;
    m.u.step.loss = loss;
    m.u.step.samples = step * 64;
    m.u.step.step_ms = step_ms;
    m.u.step.comm_ms = 4;
    m.u.step.exposed_ms = 1;
    job_apply(j, &m, t, WALL);
}

static void test_pause_outcome(void)
{
    TEST_BEGIN("pause_outcome_from_phases");
    int64_t t;
    Job *j = started_job(&t);
    for (int r = 0; r < 2; r++) send_step(j, r, 0, 5, 1.0, t += MS);
    job_set_pause_wanted(j, true);
    CHECK(j->pause_wanted && !j->paused, "pause wanted/paused");
    send_phase(j, 0, PHASE_PAUSED, "paused after step 5", t += MS);
    CHECK(!j->paused && j->state == JOB_RUNNING, "paused with one rank of two: %s", job_state_name(j->state));
    send_phase(j, 1, PHASE_PAUSED, "paused after step 5", t += MS);
    CHECK(j->paused && j->state == JOB_PAUSED && j->paused_step == 5, "not PAUSED: %s", job_state_name(j->state));
    const JobEvent *e = find_event(j, "paused: all 2 ranks at step 5");
    CHECK(e && e->rank == -1 && e->level == EV_INFO, "no paused outcome event");
    job_set_pause_wanted(j, false);
    send_phase(j, 1, PHASE_TRAIN, NULL, t += MS);
    CHECK(!j->paused && j->state == JOB_RUNNING, "not running again: %s", job_state_name(j->state));
    CHECK(find_event(j, "resumed at step 5"), "no resumed event");
    uint64_t ev = j->ev_total;
    send_phase(j, 0, PHASE_TRAIN, NULL, t += MS);
    CHECK(j->ev_total == ev + 1, "second rank's resume told twice (%llu events)",
          (unsigned long long)(j->ev_total - ev));
    /* ranks that pause at different steps did not agree: a warning */
    send_step(j, 1, 0, 6, 1.0, t += MS);
    send_phase(j, 0, PHASE_PAUSED, NULL, t += MS);
    send_phase(j, 1, PHASE_PAUSED, NULL, t += MS);
    e = find_event(j, "paused at different steps (5..6)");
    CHECK(e && e->level == EV_WARN, "no disagreement warning");
    /* a stop while paused ends the pause without "resumed" */
    ev = j->ev_total;
    send_phase(j, 0, PHASE_STOPPING, NULL, t += MS);
    CHECK(!j->paused && j->state == JOB_STOPPING, "stopping while paused: %s", job_state_name(j->state));
    for (uint64_t n = ev; n < j->ev_total; n++)
        CHECK(!strstr(job_event_nth(j, n)->text, "resumed"), "resumed told on a stop");
    job_free(&j);

    /* a rank that has not said hello yet is not paused */
    j = job_new(2, T0);
    t = j->start_ns;
    job_rank_started(j, 0, 10, t);
    job_rank_started(j, 1, 11, t);
    send_hello(j, 0, 10, t += MS);
    send_phase(j, 0, PHASE_PAUSED, NULL, t += MS);
    CHECK(!j->paused, "paused while rank 1 never said hello");
    send_hello(j, 1, 11, t += MS);
    send_phase(j, 1, PHASE_PAUSED, NULL, t += MS);
    CHECK(j->paused && find_event(j, "paused: all 2 ranks at step 0"), "late rank's pause not counted");
    job_free(&j);
    TEST_END();
}

static void test_evals(void)
{
    TEST_BEGIN("evals_kept_once_not_events");
    int64_t t;
    Job *j = started_job(&t);
    uint64_t ev = j->ev_total;
    Msg m;
    for (int r = 0; r < 2; r++) {
        msg_init(&m, MSG_EVAL);
        m.rank = r;
        m.u.eval.epoch = 0;
        m.u.eval.step = 469;
        m.u.eval.accuracy = 0.8412;
        m.u.eval.loss = 0.43;
        m.u.eval.correct = 8412;
        m.u.eval.total = 10000;
        job_apply(j, &m, t += MS, WALL);
    }
    CHECK(j->n_evals == 1, "every rank's copy kept: %d", j->n_evals);
    const JobEval *e = job_eval_at(j, 0);
    CHECK(e && e->step == 469 && e->accuracy == 0.8412 && e->correct == 8412, "eval values");
    CHECK(j->ev_total == ev, "an eval became an event");
    m.u.eval.epoch = 1;
    m.u.eval.step = 938;
    m.u.eval.accuracy = 0.86;
    job_apply(j, &m, t += MS, WALL);
    CHECK(j->n_evals == 2 && job_eval_at(j, 0)->step == 938 && job_eval_at(j, 1)->step == 469, "eval order");
    CHECK(job_eval_at(j, 2) == NULL, "past the evals");
    job_free(&j);
    TEST_END();
}

static void coll(Job *j, int rank, int64_t seq, int bucket, int64_t step, int64_t enq_ms, double ms, int64_t t)
{
    Msg m;
    msg_init(&m, MSG_COLL);
    m.rank = rank;
    m.u.coll.seq = seq;
    snprintf(m.u.coll.op, sizeof m.u.coll.op, "allreduce");
    m.u.coll.bucket = bucket;
    m.u.coll.step = step;
    m.u.coll.bytes = 1 << 20;
    m.u.coll.enq_ns = 1000 * SEC + enq_ms * MS;
    m.u.coll.start_ns = m.u.coll.enq_ns;
    m.u.coll.done_ns = m.u.coll.start_ns + (int64_t)(ms * MS);
    m.u.coll.algbw_gbs = 1.0;
    m.u.coll.busbw_gbs = 1.5;
    job_apply(j, &m, t, WALL);
}

static void test_collectives(void)
{
    TEST_BEGIN("collective_straggler_waiting_and_buckets");
    Job *j = job_new(3, T0);
    int64_t t = j->start_ns;
    /* seq 10: rank 1 enters 3 ms after rank 0, rank 2 in between */
    coll(j, 0, 10, 0, 7, 100, 4.0, t += MS);
    coll(j, 1, 10, 0, 7, 103, 1.0, t += MS);
    coll(j, 2, 10, 0, 7, 101, 3.0, t += MS);
    const JobColl *list[8];
    int n = job_colls_recent(j, list, 8);
    CHECK(n == 1 && list[0]->seq == 10 && list[0]->arrived == 3 && list[0]->done == 3, "recent: n %d", n);
    const JobColl *c = list[0];
    CHECK(c->last_rank == 1 && c->first_rank == 0, "last %d first %d", c->last_rank, c->first_rank);
    CHECK(c->last_ns - c->prev_last_ns == 2 * MS && c->last_ns - c->first_ns == 3 * MS, "lateness %lld spread %lld",
          (long long)(c->last_ns - c->prev_last_ns), (long long)(c->last_ns - c->first_ns));
    /* in at 100, 103, 101 ms, all done at 104: 1 ms of transfer after 3 of
     * waiting, and the bandwidths of the transfer alone (1 MiB / 1 ms) */
    JobCollTimes tm;
    CHECK(job_coll_times(j, c, &tm) && fabs(tm.xfer_ms - 1.0) < 1e-9 && fabs(tm.wait_ms - 3.0) < 1e-9 &&
              fabs(tm.algbw_gbs - 1.048576) < 1e-9 && fabs(tm.busbw_gbs - 1.048576 * 2 * 2 / 3) < 1e-9,
          "xfer %.3f wait %.3f algbw %.6f busbw %.6f", tm.xfer_ms, tm.wait_ms, tm.algbw_gbs, tm.busbw_gbs);
    /* seq 11 in flight on ranks 0 and 2 (heartbeats): everybody waits for rank 1 */
    Msg m;
    for (int r = 0; r <= 2; r += 2) {
        msg_init(&m, MSG_BEAT);
        m.rank = r;
        m.u.beat.step = 7;
        m.u.beat.coll_seq = 11;
        snprintf(m.u.beat.coll_op, sizeof m.u.beat.coll_op, "allreduce");
        m.u.beat.coll_since_ns = 2000 * SEC;
        job_apply(j, &m, t += MS, WALL);
    }
    n = job_colls_recent(j, list, 8);
    CHECK(n == 2 && list[0]->seq == 11 && list[0]->arrived == 2 && list[0]->done == 0, "in-flight collective");
    CHECK(list[0]->step == 8, "in-flight step %lld", (long long)list[0]->step);
    CHECK(!job_coll_times(j, list[0], &tm) && tm.xfer_ms == 0 && tm.algbw_gbs == 0, "an open collective has no figures");
    CHECK(job_coll_arrived(j, list[0], 0) && !job_coll_arrived(j, list[0], 1) && job_coll_arrived(j, list[0], 2),
          "arrivals");
    j->ranks[0].state = RANK_ALIVE;
    int64_t seq;
    double secs;
    CHECK(job_rank_in_flight(&j->ranks[0], 2000 * SEC + 3 * SEC, &seq, &secs) && seq == 11 && fabs(secs - 3) < 1e-9,
          "rank 0 not in flight");
    CHECK(!job_rank_in_flight(&j->ranks[0], 2000 * SEC + SEC / 2, NULL, NULL), "in flight after half a second");
    /* an old seq after the ring moved on is ignored, not a crash */
    coll(j, 0, 10 + JOB_COLL_RING, 0, 8, 200, 1, t += MS);
    coll(j, 1, 10, 0, 7, 103, 1.0, t += MS);
    CHECK(job_colls_recent(j, list, 8) >= 1 && list[0]->seq == 10 + JOB_COLL_RING, "ring order");
    /* buckets: means over ranks per step */
    job_free(&j);
    j = job_new(2, T0);
    t = j->start_ns;
    for (int s = 1; s <= 3; s++)
        for (int r = 0; r < 2; r++) {
            coll(j, r, 2 * s, 0, s, s * 10, 2.0 + r, t += MS);
            coll(j, r, 2 * s + 1, 1, s, s * 10, 1.0, t += MS);
        }
    CHECK(j->n_buckets == 2 && j->buckets[0].used && j->buckets[1].used, "buckets %d", j->n_buckets);
    /* both ranks in at s*10 ms, done after 2 and 3 ms: the transfer is 3 ms */
    CHECK(fabs(j->buckets[0].last.xfer_ms - 3.0) < 1e-9 && j->buckets[0].last.wait_ms == 0 &&
              j->buckets[0].last_step == 3,
          "bucket 0 xfer %.3f step %lld", j->buckets[0].last.xfer_ms, (long long)j->buckets[0].last_step);
    CHECK(j->buckets[0].ms.len == 3 && fabs(series_bin_mean(&j->buckets[0].ms.bin[2]) - 3.0) < 1e-9, "bucket series");
    /* the figures a view shows: the last step every rank reported, none before */
    CHECK(job_bucket_times(j, 0, &tm) && fabs(tm.xfer_ms - 3.0) < 1e-9 &&
              fabs(tm.algbw_gbs - (double)(1 << 20) / 3e6) < 1e-12 && fabs(tm.busbw_gbs - tm.algbw_gbs) < 1e-12,
          "bucket 0 shown %.3f ms %.6f GB/s", tm.xfer_ms, tm.algbw_gbs);
    coll(j, 0, 20, 2, 4, 40, 6.0, t += MS);
    CHECK(!job_bucket_times(j, 2, &tm) && tm.xfer_ms == 0 && j->buckets[2].used, "half-gathered bucket shown %.3f",
          tm.xfer_ms);
    CHECK(!job_bucket_times(j, JOB_MAX_BUCKETS, &tm) && tm.xfer_ms == 0, "bucket past the end");
    /* in bursts: rank 0's steps 5-9, then rank 1's (3 ms, 5 ms each): the
     * figures are both ranks' at step 9, not one rank's last */
    for (int r = 0; r < 2; r++)
        for (int s = 5; s <= 9; s++) coll(j, r, 100 + 2 * s, 3, s, 40, 3.0 + 2 * r, t += MS);
    CHECK(job_bucket_times(j, 3, &tm) && fabs(tm.xfer_ms - 5.0) < 1e-9 && j->buckets[3].last_step == 9,
          "bucket 3 in bursts: %.3f at step %lld", tm.xfer_ms, (long long)j->buckets[3].last_step);
    /* rank 1 then stalls: rank 0's steps 10-12 alone do not make the figures
     * one rank's; a straggler's report older than the steps kept is left out */
    for (int s = 10; s <= 12; s++) coll(j, 0, 100 + 2 * s, 3, s, 40, 9.0, t += MS);
    coll(j, 1, 99, 3, 12 - JOB_BUCKET_STEPS, 40, 100.0, t += MS);
    CHECK(job_bucket_times(j, 3, &tm) && fabs(tm.xfer_ms - 5.0) < 1e-9 && j->buckets[3].last_step == 9,
          "bucket 3 with a rank behind: %.3f", tm.xfer_ms);
    double cf, ef, hf, cms, ems;
    CHECK(!job_comm_share(j, &cf, &ef, &hf, &cms, &ems), "share without steps");
    send_step_ms(j, 0, 3, 1.0, 10, t += MS);
    send_step_ms(j, 1, 3, 1.0, 10, t += MS);
    CHECK(job_comm_share(j, &cf, &ef, &hf, &cms, &ems) && fabs(cf - 0.4) < 1e-9 && fabs(ef - 0.1) < 1e-9 &&
              fabs(hf - 0.75) < 1e-9,
          "share %.2f exposed %.2f hidden %.2f", cf, ef, hf);
    job_free(&j);
    TEST_END();
}

/* A collective of one rank's report, with its shape (count -1: none). */
static void coll_shape(Job *j, int rank, int64_t seq, const char *op, int64_t count, const char *dtype, int64_t t)
{
    Msg m;
    msg_init(&m, MSG_COLL);
    m.rank = rank;
    m.u.coll.seq = seq;
    snprintf(m.u.coll.op, sizeof m.u.coll.op, "%s", op);
    m.u.coll.count = count;
    snprintf(m.u.coll.dtype, sizeof m.u.coll.dtype, "%s", dtype);
    m.u.coll.bytes = count > 0 ? count * 4 : 0;
    m.u.coll.start_ns = m.u.coll.enq_ns = 1000 * SEC;
    m.u.coll.done_ns = m.u.coll.start_ns + MS;
    job_apply(j, &m, t, WALL);
}

/* Events whose text holds s. */
static int events_holding(const Job *j, const char *s)
{
    int n = 0;
    for (int i = 0;; i++) {
        const JobEvent *e = job_event_at(j, i);
        if (!e) return n;
        n += strstr(e->text, s) != NULL;
    }
}

/* The issue's panel: rank 0 in at 0, rank 1 25 ms later, both done 0.8 ms
 * after that. The old figures were a mean of the ranks' own times (25.8 and
 * 0.8 ms) and of their ratios; the transfer is 0.8 ms, the wait 25 ms, and
 * the bandwidth is of the 0.8 ms. A collective every rank entered but not
 * every rank finished has no figures; hidden comm is never negative. */
static void test_coll_transfer(void)
{
    TEST_BEGIN("collective_transfer_wait_and_bandwidth");
    Job *j = job_new(2, T0);
    int64_t t = j->start_ns;
    coll(j, 0, 5, 0, 1, 0, 25.8, t += MS);
    coll(j, 1, 5, 0, 1, 25, 0.8, t += MS);
    const JobColl *list[4];
    CHECK(job_colls_recent(j, list, 4) == 1, "one collective");
    JobCollTimes tm, bt;
    CHECK(job_coll_times(j, list[0], &tm) && fabs(tm.xfer_ms - 0.8) < 1e-9 && fabs(tm.wait_ms - 25.0) < 1e-9,
          "xfer %.3f wait %.3f", tm.xfer_ms, tm.wait_ms);
    CHECK(fabs(tm.algbw_gbs - (double)(1 << 20) / 0.8e6) < 1e-9 && fabs(tm.busbw_gbs - tm.algbw_gbs) < 1e-12,
          "algbw %.4f busbw %.4f (want %.4f: 1 MiB / 0.8 ms)", tm.algbw_gbs, tm.busbw_gbs, (double)(1 << 20) / 0.8e6);
    CHECK(job_bucket_times(j, 0, &bt) && !memcmp(&bt, &tm, sizeof tm), "the bucket says the same: %.3f %.3f",
          bt.xfer_ms, bt.algbw_gbs);
    /* every rank in (beats), one done: no figures, not 0 ms */
    Msg m;
    for (int r = 0; r < 2; r++) {
        msg_init(&m, MSG_BEAT);
        m.rank = r;
        m.u.beat.step = 1;
        m.u.beat.coll_seq = 6;
        snprintf(m.u.beat.coll_op, sizeof m.u.beat.coll_op, "allreduce");
        m.u.beat.coll_since_ns = 2000 * SEC;
        job_apply(j, &m, t += MS, WALL);
    }
    coll(j, 0, 6, -1, 2, 1000 * 1000, 1.0, t += MS);
    CHECK(job_colls_recent(j, list, 4) == 2 && list[0]->seq == 6 && list[0]->arrived == 2 && list[0]->done == 1,
          "seq 6 all in, one done");
    CHECK(!job_coll_times(j, list[0], &tm) && tm.xfer_ms == 0, "an unfinished collective has figures");
    /* exposed above comm (two clocks): nothing hidden, not a negative share */
    for (int r = 0; r < 2; r++) {
        msg_init(&m, MSG_STEP);
        m.rank = r;
        m.u.step.step = 2;
        m.u.step.step_ms = 10;
        m.u.step.comm_ms = 4;
        m.u.step.exposed_ms = 4.02;
        job_apply(j, &m, t += MS, WALL);
    }
    double cf, ef, hf;
    CHECK(job_comm_share(j, &cf, &ef, &hf, NULL, NULL) && hf == 0.0 && !signbit(hf), "hidden %.4f", hf);
    job_free(&j);
    TEST_END();
}

/* Ranks that pass one collective number different counts, dtypes or ops
 * are named, live (one event) and after the ring has moved on, the lower
 * rank first whichever reported first. */
static void test_coll_mismatch(void)
{
    TEST_BEGIN("collective_shape_desync_named");
    Job *j = job_new(3, T0);
    int64_t t = j->start_ns;
    char buf[160];
    coll_shape(j, 0, 41, "allreduce", 10, "float32", t += MS);
    coll_shape(j, 1, 41, "allreduce", 10, "float32", t += MS);
    CHECK(!job_coll_mismatch(j, 41, buf, sizeof buf) && !buf[0], "agreeing ranks: '%s'", buf);
    coll_shape(j, 0, 42, "allreduce", 10, "float32", t += MS);
    coll_shape(j, 2, 42, "allreduce", 10, "float32", t += MS);
    coll_shape(j, 1, 42, "allreduce", 20, "float32", t += MS);
    CHECK(job_coll_mismatch(j, 42, buf, sizeof buf) && !strcmp(buf, "allreduce #42: rank 0 has 10 float32, rank 1 has 20"),
          "'%s'", buf);
    CHECK(events_holding(j, "allreduce #42: rank 0 has 10 float32, rank 1 has 20") == 1 &&
              (j->ranks[1].lints & JOB_LINT_SHAPE),
          "no live event");
    /* a dtype apart, the op apart */
    coll_shape(j, 1, 43, "allreduce", 10, "int32", t += MS);
    coll_shape(j, 0, 43, "allreduce", 10, "float32", t += MS);
    CHECK(job_coll_mismatch(j, 43, buf, sizeof buf) && !strcmp(buf, "allreduce #43: rank 0 has 10 float32, rank 1 has 10 int32"),
          "'%s'", buf);
    coll_shape(j, 2, 44, "broadcast", 10, "float32", t += MS);
    coll_shape(j, 0, 44, "allreduce", 20, "float32", t += MS);
    CHECK(job_coll_mismatch(j, 44, buf, sizeof buf) &&
              !strcmp(buf, "collective #44: rank 0 has allreduce of 20 float32, rank 2 has broadcast of 10"),
          "'%s'", buf);
    coll_shape(j, 0, 45, "barrier", 0, "", t += MS);
    coll_shape(j, 1, 45, "allreduce", 4, "float32", t += MS);
    CHECK(job_coll_mismatch(j, 45, buf, sizeof buf) &&
              !strcmp(buf, "collective #45: rank 0 has barrier, rank 1 has allreduce of 4 float32"),
          "'%s'", buf);
    /* a worker that says no shape (count -1) is no mismatch; nor is a barrier */
    coll_shape(j, 0, 46, "allreduce", 10, "float32", t += MS);
    coll_shape(j, 1, 46, "allreduce", -1, "", t += MS);
    coll_shape(j, 0, 47, "barrier", 0, "", t += MS);
    coll_shape(j, 1, 47, "barrier", 0, "", t += MS);
    CHECK(!job_coll_mismatch(j, 46, buf, sizeof buf) && !job_coll_mismatch(j, 47, buf, sizeof buf), "'%s'", buf);
    /* the first one stays named once the ring has moved on */
    for (int64_t s = 48; s < 48 + JOB_COLL_RING; s++) coll_shape(j, 0, s, "allreduce", 1, "float32", t += MS);
    CHECK(!job_coll_mismatch(j, 42, buf, sizeof buf), "seq 42 still in the ring");
    CHECK(job_coll_mismatch_first(j, buf, sizeof buf) == 42 &&
              !strcmp(buf, "allreduce #42: rank 0 has 10 float32, rank 1 has 20"),
          "first '%s'", buf);
    CHECK(!job_coll_mismatch(j, -1, buf, sizeof buf) && !job_coll_mismatch(j, 1 << 20, buf, sizeof buf), "bad seq");
    /* in flight: the beats the ranks send as they enter (one aborts inside) */
    for (int r = 0; r < 2; r++) {
        Msg m;
        msg_init(&m, MSG_BEAT);
        m.rank = r;
        m.u.beat.coll_seq = 200;
        snprintf(m.u.beat.coll_op, sizeof m.u.beat.coll_op, "allreduce");
        m.u.beat.coll_since_ns = 2000 * SEC;
        m.u.beat.coll_count = r ? 20 : 10;
        snprintf(m.u.beat.coll_dtype, sizeof m.u.beat.coll_dtype, "float32");
        job_apply(j, &m, t += MS, WALL);
    }
    CHECK(job_coll_mismatch(j, 200, buf, sizeof buf) && !strcmp(buf, "allreduce #200: rank 0 has 10 float32, rank 1 has 20"),
          "in flight '%s'", buf);
    job_free(&j);
    j = job_new(2, T0);
    CHECK(job_coll_mismatch_first(j, buf, sizeof buf) == -1 && !buf[0], "a new job has none");
    job_free(&j);
    TEST_END();
}

static void shard(Job *j, int rank, int64_t epoch, bool shuffle, const int64_t *idx, uint32_t n, int64_t size,
                  int64_t t)
{
    Msg m;
    msg_init(&m, MSG_SHARD);
    m.rank = rank;
    m.u.shard.epoch = epoch;
    m.u.shard.shuffle = shuffle;
    m.u.shard.dataset_size = size;
    m.u.shard.num_samples = n;
    m.u.shard.total_size = n * j->world;
    m.u.shard.padding = n * j->world - size;
    m.u.shard.n_idx = n;
    m.u.shard.idx = (int64_t *)idx; /* borrowed: no msg_done */
    job_apply(j, &m, t, WALL);
}

static void test_shard_map(void)
{
    TEST_BEGIN("sampler_map_padding_and_set_epoch");
    Job *j = job_new(2, T0);
    int64_t t = j->start_ns;
    /* N = 5 over 2 ranks: 3 each, index 3 handed out twice (padding) */
    int64_t a[] = { 3, 0, 2 }, b[] = { 1, 4, 3 };
    shard(j, 0, 0, true, a, 3, 5, t += MS);
    shard(j, 1, 0, true, b, 3, 5, t += MS);
    int count;
    CHECK(j->shard.epoch == 0 && j->shard.ranks == 2 && j->shard.size == 5, "map epoch %lld ranks %d",
          (long long)j->shard.epoch, j->shard.ranks);
    CHECK(job_shard_owner(j, 3, &count) == 0 && count == 2 && j->shard.dup_indices == 1, "padding duplicate");
    CHECK(job_shard_owner(j, 4, &count) == 1 && count == 1, "index 4");
    CHECK(job_shard_owner(j, 5, NULL) == -1 && job_shard_owner(j, -1, NULL) == -1, "outside the map");
    /* the same shard again changes nothing */
    shard(j, 0, 0, true, a, 3, 5, t += MS);
    CHECK(j->shard.ranks == 2 && job_shard_owner(j, 0, &count) == 0 && count == 1, "resent shard counted twice");
    /* epoch 1 in the same order: set_epoch forgotten, told once */
    uint64_t ev = j->ev_total;
    shard(j, 0, 1, true, a, 3, 5, t += MS);
    /* one rank's shard of a new epoch came first: the panel keeps the last
     * complete epoch rather than show rank 1 missing */
    CHECK(j->shard.epoch == 0 && j->shard.ranks == 2 && job_shard_owner(j, 4, NULL) == 1,
          "a new epoch's first shard replaced the complete map: epoch %lld ranks %d", (long long)j->shard.epoch,
          j->shard.ranks);
    shard(j, 1, 1, true, b, 3, 5, t += MS);
    CHECK(j->shard.epoch == 1 && j->shard.ranks == 2 && job_shard_owner(j, 4, NULL) == 1, "epoch 1 not shown: %lld",
          (long long)j->shard.epoch);
    const JobEvent *e = find_event(j, "epoch 1 has the same sample order as epoch 0");
    CHECK(e && e->level == EV_WARN && e->rank == 0, "no set_epoch warning");
    CHECK(j->ev_total == ev + 1, "warned %llu times", (unsigned long long)(j->ev_total - ev));
    CHECK(j->shard.same_order_rank == 0 && j->shard.same_order_epoch == 1, "warning not kept for the panel");
    /* a new order: no warning; without shuffle the same order is expected */
    int64_t a2[] = { 0, 2, 4 };
    ev = j->ev_total;
    shard(j, 0, 2, true, a2, 3, 5, t += MS);
    shard(j, 0, 3, false, a2, 3, 5, t += MS);
    CHECK(j->ev_total == ev, "warned on a new order or without shuffle");
    /* an older epoch does not disturb the map */
    shard(j, 1, 2, true, b, 3, 5, t += MS);
    CHECK(j->shard.epoch == 1 && j->shard.ranks == 2, "an incomplete or older epoch entered the map");
    CHECK(j->ranks[1].shard_epoch == 2 && j->ranks[1].first_idx[0] == 1, "rank summary still updated");
    job_free(&j);
    TEST_END();
}

/* Telemetry bursts: 4 ranks in DDP lockstep report their steps 50 ms at a
 * time, so at 200 steps/s rank 1's newest report is 12 steps older than rank
 * 0's. Shown, every healthy rank is within one step of the front and in its
 * epoch; a rank that stopped reporting shows its own step. */
static void test_shown_steps(void)
{
    TEST_BEGIN("bursts_never_show_as_drift");
    Job *j = job_new(4, T0);
    int64_t t = j->start_ns;
    for (int r = 0; r < 4; r++) {
        job_rank_started(j, r, 100 + r, t);
        send_hello(j, r, 100 + r, t += MS);
        send_phase(j, r, PHASE_TRAIN, NULL, t += MS);
    }
    /* 100 steps an epoch; the ranks' bursts of 10 steps arrive in turn */
    int64_t reached[4] = { 0, 0, 0, 0 };
    int worst = 0, epoch_split = 0;
    for (int burst = 0; burst < 40; burst++) {
        int r = burst % 4;
        for (int k = 0; k < 10 + (r == 0 ? 3 : 0); k++) {
            reached[r]++;
            send_step(j, r, (reached[r] - 1) / 100, reached[r], 1.0, t += MS / 10);
        }
        t += 12 * MS;
        JobShownStep sh[4];
        for (int i = 0; i < 4; i++) job_rank_shown_step(j, &j->ranks[i], t, &sh[i]);
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++) {
                if (!j->ranks[a].have_step || !j->ranks[b].have_step) continue;
                int64_t d = sh[a].step - sh[b].step;
                if (d > worst) worst = (int)d;
                if (sh[a].epoch != sh[b].epoch && sh[a].step != 100 && sh[b].step != 100) epoch_split++;
            }
    }
    CHECK(worst <= 1, "healthy ranks shown %d steps apart", worst);
    CHECK(epoch_split == 0, "healthy ranks shown in different epochs %d times", epoch_split);
    int64_t ep = -1, agreed = job_step_agreed(j, t, &ep);
    CHECK(agreed == reached[0] - 1 && ep == (reached[0] - 2) / 100, "agreed step %lld epoch %lld, front %lld",
          (long long)agreed, (long long)ep, (long long)reached[0]);
    JobShownStep sh;
    job_rank_shown_step(j, &j->ranks[3], t, &sh);
    CHECK(sh.lifted && sh.age_s > 0.01 && sh.age_s < 1, "rank 3 lifted %d age %.3f", sh.lifted, sh.age_s);
    /* rank 3 stops reporting while the others go on: after half a second it
     * is its own step, behind, and its figures' age grows */
    for (int k = 0; k < 3; k++) send_step(j, 0, 1, ++reached[0], 1.0, t += 200 * MS);
    job_rank_shown_step(j, &j->ranks[3], t, &sh);
    CHECK(!sh.lifted && sh.step == reached[3] && sh.age_s > 0.5, "quiet rank 3: step %lld lifted %d age %.2f",
          (long long)sh.step, sh.lifted, sh.age_s);
    CHECK(job_step_agreed(j, t, NULL) == reached[3], "agreed step follows the quiet rank");
    /* in DDP lockstep (gradient buckets all-reduced) a late report is only
     * late: the rank is shown a step short of the front, dimmed by its age,
     * and not called behind */
    Msg m;
    msg_init(&m, MSG_COLL);
    m.rank = 0;
    m.u.coll.seq = 1;
    m.u.coll.bucket = 0;
    m.u.coll.step = reached[0];
    snprintf(m.u.coll.op, sizeof m.u.coll.op, "allreduce");
    job_apply(j, &m, t, WALL);
    job_rank_shown_step(j, &j->ranks[3], t, &sh);
    CHECK(sh.lifted && sh.step == reached[0] - 1 && sh.age_s > 0.5, "lockstep rank 3: step %lld lifted %d age %.2f",
          (long long)sh.step, sh.lifted, sh.age_s);
    JobOutlier o[4];
    int no = job_outliers(j, t, 0, o, 4);
    CHECK(no == 0, "%d outliers: %s", no, no ? o[0].text : "");
    job_free(&j);
    TEST_END();
}

/* world ranks launched, said hello and training (pids 100 + rank). */
static Job *training_job(int world, int64_t *t)
{
    Job *j = job_new(world, T0);
    *t = j->start_ns;
    for (int r = 0; r < world; r++) {
        job_rank_started(j, r, 100 + r, *t);
        send_hello(j, r, 100 + r, *t += MS);
        send_phase(j, r, PHASE_TRAIN, NULL, *t += MS);
    }
    return j;
}

/* slow:1:40ms: every rank's step lasts as long (the others wait for rank 1
 * in the all-reduce), so step times alone make rank 1 look the healthiest
 * (the least exposed wait). Its own time names it the straggler; the
 * others' rows say whom they wait for. */
static void send_step_wait(Job *j, int rank, int64_t step, double step_ms, double exposed_ms, int64_t t)
{
    Msg m;
    msg_init(&m, MSG_STEP);
    m.rank = rank;
    m.u.step.step = step;
    m.u.step.loss = 1.0;
    m.u.step.samples = step * 64;
    m.u.step.step_ms = step_ms;
    m.u.step.comm_ms = exposed_ms;
    m.u.step.exposed_ms = exposed_ms;
    job_apply(j, &m, t, WALL);
}

static void test_straggler(void)
{
    TEST_BEGIN("straggler_named_on_its_own_row");
    int64_t t;
    Job *j = training_job(3, &t);
    for (int s = 1; s <= 10; s++)
        for (int r = 0; r < 3; r++) send_step_wait(j, r, s, 45.0, r == 1 ? 0.0 : 40.0, t += MS);
    JobOutlier o[4];
    int n = job_outliers(j, t, 0, o, 4);
    CHECK(n == 3 && o[0].rank == 1 && o[0].kind == JOB_OUT_STRAGGLER, "straggler first: %d %s", n, n ? o[0].text : "");
    CHECK(n > 0 && strcmp(o[0].brief, "straggler: +40 ms/step") == 0 &&
              strcmp(o[0].text, "r1 straggler: compute +40 ms/step, the others wait for it") == 0,
          "brief: %s", o[0].brief);
    CHECK(n == 3 && o[1].kind == JOB_OUT_WAITING && o[1].rank == 0 && strcmp(o[1].brief, "waiting for rank 1") == 0 &&
              strcmp(o[1].text, "r0 waits 40 ms/step for rank 1") == 0,
          "rank 0: %s", n > 1 ? o[1].brief : "");
    /* the fault lifted: no straggler, nobody waits */
    for (int s = 11; s <= 20; s++)
        for (int r = 0; r < 3; r++) send_step_wait(j, r, s, 5.0, 0.5, t += MS);
    n = job_outliers(j, t, 0, o, 4);
    CHECK(n == 0, "outliers after the straggler caught up: %d %s", n, n ? o[0].text : "");
    job_free(&j);
    TEST_END();
}

/* samples/s counts training time: 0 while paused, and right at once after
 * a resume (a window that spans the pause would halve it). */
static void test_rate_pause(void)
{
    TEST_BEGIN("samples_per_s_excludes_paused_time");
    Job *j = job_new(2, T0);
    int64_t t = j->start_ns;
    for (int r = 0; r < 2; r++) {
        job_rank_started(j, r, 100 + r, t);
        send_hello(j, r, 100 + r, t += MS);
        send_phase(j, r, PHASE_TRAIN, NULL, t += MS);
    }
    int64_t step = 0;
    /* 100 steps/s, 64 samples a step a rank: 12800 samples/s */
    for (int k = 0; k < 300; k++) {
        step++;
        for (int r = 0; r < 2; r++) send_step(j, r, 0, step, 1.0, t += 5 * MS);
    }
    double before = j->samples_per_s;
    CHECK(fabs(before - 12800) < 400, "rate before the pause %.0f", before);
    for (int r = 0; r < 2; r++) send_phase(j, r, PHASE_PAUSED, NULL, t += MS);
    CHECK(j->paused && j->samples_per_s == 0, "paused: %.0f samples/s", j->samples_per_s);
    for (int k = 0; k < 10; k++) /* ten seconds of heartbeats */
        for (int r = 0; r < 2; r++) send_phase(j, r, PHASE_PAUSED, NULL, t += 500 * MS);
    CHECK(j->samples_per_s == 0, "still paused: %.0f samples/s", j->samples_per_s);
    for (int r = 0; r < 2; r++) send_phase(j, r, PHASE_TRAIN, NULL, t += MS);
    for (int k = 0; k < 100; k++) { /* one second of training again */
        step++;
        for (int r = 0; r < 2; r++) send_step(j, r, 0, step, 1.0, t += 5 * MS);
    }
    CHECK(fabs(j->samples_per_s - 12800) < 400, "a second after resuming: %.0f samples/s", j->samples_per_s);
    double rr = job_rank_samples_per_s(&j->ranks[0], t);
    CHECK(fabs(rr - 6400) < 400, "rank 0 a second after resuming: %.0f samples/s", rr);
    job_free(&j);
    TEST_END();
}

static void test_step_parts(void)
{
    TEST_BEGIN("step_parts_add_up");
    /* the issue's figures: 7.20 = 0.78 + 0.77 + opt 0.15 with comm 3.51 */
    MsgStep s = { .step_ms = 7.20, .fwd_ms = 0.78, .bwd_ms = 0.77, .opt_ms = 0.15, .comm_ms = 3.51, .exposed_ms = 2.9 };
    JobStepParts p;
    job_step_parts(&s, &p);
    double sum = p.fwd + p.bwd + p.wait + p.opt + p.other;
    CHECK(fabs(sum - 7.20) < 1e-9 && fabs(p.other - 2.60) < 1e-9, "sum %.3f other %.3f", sum, p.other);
    CHECK(fabs(p.overlapped - 0.61) < 1e-9 && fabs(p.wait + p.overlapped - p.comm) < 1e-9, "overlapped %.3f",
          p.overlapped);
    /* a worker whose bwd already holds the wait: not counted twice */
    MsgStep q = { .step_ms = 2.0, .fwd_ms = 0.5, .bwd_ms = 1.2, .opt_ms = 0.1, .comm_ms = 1.0, .exposed_ms = 0.8 };
    job_step_parts(&q, &p);
    sum = p.fwd + p.bwd + p.wait + p.opt + p.other;
    CHECK(fabs(sum - 2.0) < 1e-9 && p.wait == 0 && p.other >= 0, "sum %.3f wait %.3f other %.3f", sum, p.wait, p.other);
    TEST_END();
}

static void test_stats_outliers_order(void)
{
    TEST_BEGIN("stats_outliers_and_orders");
    int64_t t;
    Job *j = training_job(5, &t);
    double step_ms[5] = { 10, 11, 10, 30, 10 };
    for (int s = 1; s <= 10; s++)
        for (int r = 0; r < 5; r++) {
            if (r == 4 && s > 7) continue; /* rank 4 falls 3 steps behind */
            double loss = r == 2 && s == 10 ? NAN : 1.0 + 0.1 * r;
            send_step_ms(j, r, s, loss, step_ms[r], t += MS);
        }
    JobStat st[JOB_METRIC__COUNT];
    job_rank_stats(j, t, st);
    CHECK(st[JOB_METRIC_STEP_MS].n == 5 && st[JOB_METRIC_STEP_MS].median == 10 && st[JOB_METRIC_STEP_MS].max == 30 &&
              st[JOB_METRIC_STEP_MS].max_rank == 3,
          "step_ms stats: median %.1f max %.1f r%d", st[JOB_METRIC_STEP_MS].median, st[JOB_METRIC_STEP_MS].max,
          st[JOB_METRIC_STEP_MS].max_rank);
    CHECK(st[JOB_METRIC_LOSS].n == 4 && st[JOB_METRIC_LOSS].max_rank == 4, "nan loss counted in stats");
    /* rank 4's report of step 7 is 12 ms old: its burst is on its way, and
     * DDP keeps it within a step of the front */
    CHECK(st[JOB_METRIC_STEP].min == 9 && st[JOB_METRIC_STEP].max == 10, "step stats: min %.0f max %.0f",
          st[JOB_METRIC_STEP].min, st[JOB_METRIC_STEP].max);
    JobOutlier o[8];
    /* rank 4's last step arrived 12 ms ago: telemetry comes in bursts, so
     * 3 steps back is not "behind" yet */
    int n = job_outliers(j, t, 0, o, 8);
    CHECK(n == 2 && o[0].kind == JOB_OUT_NAN && o[1].kind == JOB_OUT_SLOW, "fresh rank 4 flagged: %d: %s | %s", n,
          n > 0 ? o[0].text : "", n > 1 ? o[1].text : "");
    /* half a second without a step from it while the others are ahead: behind */
    t += JOB_BEHIND_QUIET_NS;
    n = job_outliers(j, t, 0, o, 8);
    CHECK(n == 3, "outliers: %d", n);
    CHECK(n >= 3 && o[0].rank == 2 && o[0].kind == JOB_OUT_NAN && o[1].rank == 4 && o[1].kind == JOB_OUT_BEHIND &&
              o[2].rank == 3 && o[2].kind == JOB_OUT_SLOW,
          "outlier order: %s | %s | %s", o[0].text, o[1].text, o[2].text);
    CHECK(n >= 3 && strcmp(o[2].text, "r3 step 30.0 ms (3.0x median)") == 0 &&
              strcmp(o[2].brief, "slow 3.0x median") == 0,
          "slow text '%s' / '%s'", o[2].text, o[2].brief);
    CHECK(n >= 3 && strcmp(o[1].text, "r4 3 steps behind") == 0, "behind text '%s'", o[1].text);
    job_rank_stats(j, t, st);
    CHECK(st[JOB_METRIC_STEP].min == 7, "a quiet rank's own step: min %.0f", st[JOB_METRIC_STEP].min);
    CHECK(!job_rank_is_outlier(j, &j->ranks[1], t, 0) && job_rank_is_outlier(j, &j->ranks[3], t, 0), "is_outlier");
    /* a silent rank comes before all of those */
    n = job_outliers(j, t + 6 * SEC, 0, o, 1);
    CHECK(n == 5 && o[0].kind == JOB_OUT_STALE, "stale first: %d, kind %d", n, (int)o[0].kind);
    int order[5];
    job_rank_order(j, JOB_SORT_STEP_MS, false, t, 0, order);
    CHECK(order[0] == 3 && order[1] == 1, "by step ms: %d %d", order[0], order[1]);
    job_rank_order(j, JOB_SORT_STEP_MS, true, t, 0, order);
    CHECK(order[4] == 3, "reversed step ms: last %d", order[4]);
    job_rank_order(j, JOB_SORT_LOSS, false, t, 0, order);
    CHECK(order[0] == 4 && order[4] == 2, "by loss (nan last): %d .. %d", order[0], order[4]);
    job_rank_order(j, JOB_SORT_STEP, false, t, 0, order);
    CHECK(order[0] == 4, "by step: behind first, got %d", order[0]);
    job_rank_order(j, JOB_SORT_HEALTH, false, t, 0, order);
    CHECK(order[0] == 2 && order[1] == 4 && order[2] == 3 && order[3] == 0 && order[4] == 1, "health %d %d %d %d %d",
          order[0], order[1], order[2], order[3], order[4]);
    job_rank_order(j, JOB_SORT_RANK, false, t, 0, order);
    CHECK(order[0] == 0 && order[4] == 4, "by rank");
    job_free(&j);
    TEST_END();
}

static void test_series(void)
{
    TEST_BEGIN("series_decimates_exactly");
    Series s;
    series_init(&s);
    double lo, hi;
    CHECK(s.len == 0 && !series_range(&s, false, &lo, &hi), "empty series");
    for (int x = 1; x <= 5000; x++) series_add(&s, x, (double)x);
    CHECK(s.len <= SERIES_CAP && s.stride == 16 && s.first == 1, "len %d stride %lld", s.len, (long long)s.stride);
    CHECK(series_bin_mean(&s.bin[0]) == 8.5 && s.bin[0].min == 1 && s.bin[0].max == 16 && s.bin[0].n == 16,
          "bin 0: mean %.2f", series_bin_mean(&s.bin[0]));
    CHECK(series_range(&s, false, &lo, &hi) && lo == 1 && hi == 5000, "range %.0f..%.0f", lo, hi);
    CHECK(series_last_x(&s) >= 5000 && series_bin_x(&s, 1) == 17, "x of bins");
    series_add(&s, 5001, NAN);
    CHECK(s.bin[s.len - 1].n_bad == 1, "nan not counted as bad");
    series_add(&s, -3, 7);
    CHECK(s.bin[0].n == 17, "x before the first not in bin 0");
    Series p;
    series_init(&p);
    series_add(&p, 1, -1);
    series_add(&p, 2, 0.5);
    series_add(&p, 3, 2);
    CHECK(series_range(&p, true, &lo, &hi) && lo == 0.5 && hi == 2, "positive range %.2f..%.2f", lo, hi);
    TEST_END();
}

/* series_add as it was before its bin was found with a shift and its rare
 * cases were moved out of the way: the reference for the one that
 * replaced it. */
static void ref_compact(Series *s)
{
    int half = (s->len + 1) / 2;
    for (int i = 0; i < half; i++) {
        SeriesBin m, *a = &s->bin[2 * i], *b = &s->bin[2 * i + 1];
        memset(&m, 0, sizeof m);
        for (int k = 0; k < 2; k++) {
            const SeriesBin *x = k ? b : a;
            if (k && 2 * i + 1 >= s->len) break;
            if (x->n > 0) {
                if (m.n == 0) {
                    m.min = x->min;
                    m.max = x->max;
                } else {
                    if (x->min < m.min) m.min = x->min;
                    if (x->max > m.max) m.max = x->max;
                }
            }
            m.sum += x->sum;
            m.n += x->n;
            m.n_bad += x->n_bad;
        }
        s->bin[i] = m;
    }
    memset(&s->bin[half], 0, sizeof s->bin[0] * (size_t)(SERIES_CAP - half));
    s->len = half;
    s->stride *= 2;
}

static void ref_series_add(Series *s, int64_t x, double v)
{
    if (s->stride < 1) series_init(s);
    if (s->len == 0) s->first = x;
    int64_t off = x - s->first;
    if (off < 0) off = 0;
    while (off / s->stride >= SERIES_CAP) ref_compact(s);
    int i = (int)(off / s->stride);
    SeriesBin *b = &s->bin[i];
    if (!isfinite(v)) {
        b->n_bad++;
    } else {
        float f = (float)v;
        if (b->n == 0 || f < b->min) b->min = f;
        if (b->n == 0 || f > b->max) b->max = f;
        b->sum += v;
        b->n++;
    }
    if (i + 1 > s->len) s->len = i + 1;
}

/* Bin by bin, bit for bit (a sum's or a bound's sign of zero included). */
static bool series_same(const Series *a, const Series *b)
{
    if (a->first != b->first || a->stride != b->stride || a->len != b->len) return false;
    for (int i = 0; i < SERIES_CAP; i++) {
        const SeriesBin *x = &a->bin[i], *y = &b->bin[i];
        if (memcmp(&x->sum, &y->sum, sizeof x->sum) || memcmp(&x->min, &y->min, sizeof x->min) ||
            memcmp(&x->max, &y->max, sizeof x->max) || x->n != y->n || x->n_bad != y->n_bad)
            return false;
    }
    return true;
}

/* The series every step adds to (a rank's loss, the job's, a bucket's
 * times) hold what the division they replaced put there: steps in order, at
 * one x, back before the first, jumps of thousands to 2^40 (compactions
 * one after the other), from a first x below zero or far above it, values
 * of every kind (negative, -0, huge for a float, NaN, infinite). */
static void test_series_as_before(void)
{
    TEST_BEGIN("series_add_bins_as_the_division_it_replaced");
    static Series got, want;
    unsigned seed = 99;
    int bad = 0, adds = 0, compactions = 0;
    const int64_t starts[] = { 1, 0, -5000, (int64_t)1 << 50, 7 };
    for (unsigned run = 0; run < sizeof starts / sizeof starts[0]; run++) {
        series_init(&got);
        series_init(&want);
        int64_t x = starts[run];
        for (int n = 0; n < 40000; n++) {
            seed = seed * 1103515245u + 12345u;
            unsigned k = (seed >> 16) % 1000;
            int64_t was = x;
            x += k < 700   ? 1
                 : k < 850 ? 0
                 : k < 950 ? 2 + (int64_t)(k % 7)
                 : k < 985 ? -(int64_t)(k % 40)
                 : k < 997 ? 1000 + (int64_t)k
                           : (int64_t)1 << (20 + k % 21);
            if (x < was && k % 2) x = got.first - 3; /* before the first x seen */
            double v = k % 97 == 0   ? NAN
                       : k % 89 == 0 ? INFINITY
                       : k % 83 == 0 ? -INFINITY
                       : k % 79 == 0 ? 1e300
                       : k % 73 == 0 ? -0.0
                       : k % 71 == 0 ? 0.0
                                     : (double)(int)(seed % 20001 - 10000) / 997.0;
            int64_t stride = want.stride;
            series_add(&got, x, v);
            ref_series_add(&want, x, v);
            compactions += __builtin_ctzll((uint64_t)want.stride) - __builtin_ctzll((uint64_t)stride);
            adds++;
            if (!series_same(&got, &want) && bad++ < 3)
                CHECK(false, "run %u add %d (x %lld, v %g): len %d/%d stride %lld/%lld", run, n, (long long)x, v,
                      got.len, want.len, (long long)got.stride, (long long)want.stride);
        }
    }
    /* bins whose bounds are zeros of both signs: the first one a bin gets
     * stays its bound, as a compare that only moves on smaller keeps it */
    series_init(&got);
    series_init(&want);
    for (int64_t x = 1; x <= 3000; x++) {
        double v = x % 3 == 0 ? -0.0 : x % 5 == 0 ? 0.0 : x % 7 == 0 ? 2.0 : (x & 1) ? 0.0 : -0.0;
        series_add(&got, x, v);
        ref_series_add(&want, x, v);
        adds++;
        if (!series_same(&got, &want) && bad++ < 3) CHECK(false, "zeros: add at x %lld", (long long)x);
    }
    CHECK(bad == 0, "%d of %d adds left other bins", bad, adds);
    CHECK(compactions > 100, "only %d compactions: the sequence does not exercise them", compactions);
    /* a series never initialised (zeroed) starts as series_init would */
    memset(&got, 0, sizeof got);
    memset(&want, 0, sizeof want);
    series_add(&got, 12, 3.5);
    ref_series_add(&want, 12, 3.5);
    CHECK(series_same(&got, &want) && got.stride == 1 && got.first == 12, "a zeroed series");
    TEST_END();
}

/* The job's samples/s as the walk over its snapshots gives it, and as
 * job_rate_pause sets it (0 while paused, the figure from before on resume,
 * the window starting over at both). */
typedef struct {
    RateWalk w;
    bool paused;
    double before;
} PausedWalk;

static void paused_walk(PausedWalk *p, int64_t now, int64_t total)
{
    if (!p->paused) rate_walk(&p->w, now, total);
}

static void paused_walk_set(PausedWalk *p, bool paused)
{
    if (paused) p->before = p->w.rate;
    p->w.rate = paused ? 0 : p->before;
    p->w.len = 0;
    p->paused = paused;
}

/* Telemetry comes in bursts, every message of one at its frame's arrival:
 * the update that shares the last one's time takes the figure from the
 * base it kept, which must be the walk's. Bursts of 1-12 steps, colls and
 * beats from 3 ranks, frames at one instant, ms, 120 ms, seconds apart; a
 * pause and a resume at the instant of a burst (the window starts over
 * there: the next update at that same time may not use the base kept from
 * before it), and every rank gone and a late frame after that. */
static void test_samples_per_s_in_bursts(void)
{
    TEST_BEGIN("samples_per_s_in_bursts_matches_the_walk");
    Job *j = job_new(3, T0);
    int64_t t = j->start_ns;
    PausedWalk p;
    memset(&p, 0, sizeof p);
    int64_t step[3] = { 0, 0, 0 }, total = 0;
    for (int r = 0; r < 3; r++) {
        job_rank_started(j, r, 100 + r, t);
        send_hello(j, r, 100 + r, t += MS);
        paused_walk(&p, t, total);
        send_phase(j, r, PHASE_TRAIN, NULL, t += MS);
        paused_walk(&p, t, total);
    }
    unsigned seed = 3;
    int bad = 0, checked = 0, nonzero = 0, same_time = 0, pauses = 0;
    for (int frame = 0; frame < 6000; frame++) {
        seed = seed * 1103515245u + 12345u;
        unsigned k = (seed >> 16) % 1000;
        t += k < 150 ? 0 : k < 700 ? 2 * MS : k < 900 ? 17 * MS : k < 980 ? 120 * MS : k < 995 ? 700 * MS : 2500 * MS;
        int r = (int)((seed >> 4) % 3), n = 1 + (int)((seed >> 8) % 12);
        for (int i = 0; i < n; i++) {
            unsigned kind = (seed >> (i % 16)) % 3;
            Msg m;
            if (kind == 0) {
                send_step(j, r, 0, ++step[r], 1.0, t);
                total += 64;
            } else {
                msg_init(&m, kind == 1 ? MSG_COLL : MSG_BEAT);
                m.rank = r;
                if (kind == 1) snprintf(m.u.coll.op, sizeof m.u.coll.op, "allreduce");
                job_apply(j, &m, t, WALL);
            }
            paused_walk(&p, t, total);
            same_time += i > 0;
            checked++;
            nonzero += p.w.rate > 0;
            if (j->samples_per_s != p.w.rate && bad++ < 3)
                CHECK(false, "frame %d message %d: %.3f samples/s, the walk %.3f", frame, i, j->samples_per_s,
                      p.w.rate);
        }
        if (frame % 500 == 250) { /* every rank pauses and resumes at this burst's instant */
            for (int q = 0; q < 3; q++) {
                send_phase(j, q, PHASE_PAUSED, NULL, t);
                if (q == 2) paused_walk_set(&p, true);
                paused_walk(&p, t, total);
            }
            CHECK(j->paused && j->samples_per_s == 0, "frame %d: not paused (%.1f samples/s)", frame, j->samples_per_s);
            for (int q = 0; q < 3; q++) {
                send_phase(j, q, PHASE_TRAIN, NULL, t);
                if (q == 0) paused_walk_set(&p, false);
                paused_walk(&p, t, total);
                if (j->samples_per_s != p.w.rate && bad++ < 3)
                    CHECK(false, "frame %d resume %d: %.3f samples/s, the walk %.3f", frame, q, j->samples_per_s,
                          p.w.rate);
            }
            pauses++;
        }
    }
    CHECK(bad == 0, "%d of %d figures differ", bad, checked);
    CHECK(nonzero > checked / 2 && same_time > checked / 2 && pauses > 5,
          "%d figures above 0, %d at a burst's shared time, %d pauses of %d: the sequence does not exercise them",
          nonzero, same_time, pauses, checked);
    /* every rank gone: 0; a late frame at that instant computes it again, as
     * every update does once the window is measurable */
    for (int r = 0; r < 3; r++) job_rank_exited(j, r, 100 + r, 0, NULL, t, WALL);
    CHECK(j->samples_per_s == 0, "%.1f samples/s with every rank gone", j->samples_per_s);
    Msg m;
    msg_init(&m, MSG_BEAT);
    m.rank = 1;
    job_apply(j, &m, t, WALL);
    paused_walk(&p, t, total);
    CHECK(j->samples_per_s == p.w.rate, "a late beat: %.3f samples/s, the walk %.3f", j->samples_per_s, p.w.rate);
    job_free(&j);
    TEST_END();
}

/* Collectives whose op is exactly "allreduce" feed the buckets, whatever
 * the bytes after the string (a compare of its 10 bytes replaced strcmp). */
static void test_allreduce_bucket_op(void)
{
    TEST_BEGIN("only_allreduce_feeds_the_buckets_whatever_follows_it");
    struct {
        const char *op;
        bool garbage, bucket;
    } cases[] = {
        { "allreduce", false, true }, { "allreduce", true, true },   { "allreduce2", false, false },
        { "allreduc", false, false }, { "allreduc", true, false },   { "Allreduce", false, false },
        { "", false, false },         { "broadcast", false, false },
    };
    for (unsigned c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        Job *j = job_new(2, T0);
        Msg m;
        msg_init(&m, MSG_COLL);
        m.rank = 1;
        m.u.coll.seq = 1;
        m.u.coll.bucket = 0;
        m.u.coll.step = 1;
        if (cases[c].garbage) memset(m.u.coll.op, 'x', sizeof m.u.coll.op);
        size_t n = strlen(cases[c].op);
        memcpy(m.u.coll.op, cases[c].op, n + 1);
        job_apply(j, &m, T0 + MS, WALL);
        CHECK(j->buckets[0].used == cases[c].bucket && (j->n_buckets == 1) == cases[c].bucket, "op \"%s\"%s: bucket %s",
              cases[c].op, cases[c].garbage ? " (bytes after it)" : "", j->buckets[0].used ? "fed" : "not fed");
        job_free(&j);
    }
    TEST_END();
}

/* ---- job_apply_burst against job_apply one message at a time ---- */

static bool same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* The first difference between what two models show (figures, events,
 * every rank's histories and rates, buckets, matched collectives) into
 * why; false when there is none. */
static bool jobs_differ(const Job *a, const Job *b, int64_t now, char *why, size_t n)
{
#define DIFF(cond, ...)                    \
    do {                                   \
        if (cond) {                        \
            snprintf(why, n, __VA_ARGS__); \
            return true;                   \
        }                                  \
    } while (0)
    DIFF(a->step != b->step || a->epoch != b->epoch, "step %lld/%lld epoch %lld/%lld", (long long)a->step,
         (long long)b->step, (long long)a->epoch, (long long)b->epoch);
    DIFF(!same_bits(a->samples_per_s, b->samples_per_s), "samples/s %.6f/%.6f", a->samples_per_s, b->samples_per_s);
    DIFF(a->version != b->version || a->bad_frames != b->bad_frames || a->drops != b->drops,
         "version %llu/%llu bad %llu/%llu", (unsigned long long)a->version, (unsigned long long)b->version,
         (unsigned long long)a->bad_frames, (unsigned long long)b->bad_frames);
    DIFF(a->state != b->state || a->paused != b->paused || a->n_stepped != b->n_stepped || a->nodes != b->nodes ||
             a->n_evals != b->n_evals || a->n_buckets != b->n_buckets,
         "state %d/%d paused %d/%d", a->state, b->state, a->paused, b->paused);
    DIFF(!series_same(&a->loss_all, &b->loss_all), "the job's loss series");
    DIFF(a->ev_total != b->ev_total, "events %llu/%llu", (unsigned long long)a->ev_total,
         (unsigned long long)b->ev_total);
    for (int i = 0; job_event_at(a, i); i++) {
        const JobEvent *x = job_event_at(a, i), *y = job_event_at(b, i);
        DIFF(x->t_ns != y->t_ns || x->mono_ns != y->mono_ns || x->rank != y->rank || x->level != y->level ||
                 strcmp(x->text, y->text),
             "event %d: \"%.100s\" / \"%.100s\"", i, x->text, y->text);
    }
    for (int k = 0; k < a->world; k++) {
        const JobRank *x = &a->ranks[k], *y = &b->ranks[k];
        DIFF(x->state != y->state || x->phase != y->phase || x->phase_since_ns != y->phase_since_ns ||
                 x->have_step != y->have_step || x->last_msg_ns != y->last_msg_ns || x->have_coll != y->have_coll ||
                 x->have_beat != y->have_beat || x->beat_ns != y->beat_ns || x->python != y->python ||
                 x->lints != y->lints || x->ring_len != y->ring_len || x->colls_len != y->colls_len ||
                 x->phases_len != y->phases_len || x->logs_len != y->logs_len || x->bye != y->bye,
             "rank %d's state", k);
        DIFF(memcmp(&x->last, &y->last, sizeof x->last) || memcmp(&x->beat, &y->beat, sizeof x->beat),
             "rank %d's last step or beat", k);
        DIFF(!series_same(&x->loss_hist, &y->loss_hist), "rank %d's loss series", k);
        DIFF(!same_bits(job_rank_samples_per_s(x, now), job_rank_samples_per_s(y, now)) ||
                 !same_bits(job_rank_allreduce_ms(x), job_rank_allreduce_ms(y)) ||
                 job_rank_beat_in_coll(x) != job_rank_beat_in_coll(y),
             "rank %d's rate %.3f/%.3f", k, job_rank_samples_per_s(x, now), job_rank_samples_per_s(y, now));
        for (int i = 0; i < x->ring_len; i++)
            DIFF(memcmp(job_rank_step_at(x, i), job_rank_step_at(y, i), sizeof(JobStepRec)), "rank %d's step %d", k, i);
        for (int i = 0; i < x->colls_len; i++) {
            const JobCollRec *c = job_rank_coll_at(x, i), *e = job_rank_coll_at(y, i);
            DIFF(c->c.seq != e->c.seq || strcmp(c->c.op, e->c.op) || !same_bits(c->ms, e->ms) ||
                     !same_bits(c->wait_ms, e->wait_ms),
                 "rank %d's collective %d", k, i);
        }
    }
    for (int k = 0; k < JOB_MAX_BUCKETS; k++) {
        JobCollTimes t1, t2;
        bool f1 = job_bucket_times(a, k, &t1), f2 = job_bucket_times(b, k, &t2);
        DIFF(f1 != f2 || !same_bits(t1.xfer_ms, t2.xfer_ms) || !same_bits(t1.wait_ms, t2.wait_ms) ||
                 !same_bits(t1.algbw_gbs, t2.algbw_gbs) || !same_bits(t1.busbw_gbs, t2.busbw_gbs) ||
                 !series_same(&a->buckets[k].ms, &b->buckets[k].ms),
             "bucket %d", k);
    }
    const JobColl *ca[JOB_COLL_RING], *cb[JOB_COLL_RING];
    int na = job_colls_recent(a, ca, JOB_COLL_RING), nb = job_colls_recent(b, cb, JOB_COLL_RING);
    DIFF(na != nb, "%d/%d collectives", na, nb);
    for (int i = 0; i < na; i++) {
        const JobColl *x = ca[i], *y = cb[i];
        DIFF(x->seq != y->seq || x->arrived != y->arrived || x->done != y->done || x->first_rank != y->first_rank ||
                 x->last_rank != y->last_rank || x->first_ns != y->first_ns || x->last_ns != y->last_ns ||
                 x->in_last_ns != y->in_last_ns || x->done_last_ns != y->done_last_ns || x->count != y->count ||
                 x->odd_rank != y->odd_rank || strcmp(x->op, y->op),
             "collective #%lld", (long long)x->seq);
        for (int r = 0; r < a->world; r++)
            DIFF(job_coll_arrived(a, x, r) != job_coll_arrived(b, y, r), "collective #%lld rank %d", (long long)x->seq,
                 r);
    }
    return false;
#undef DIFF
}

/* One message of a burst: mostly steps and collectives, some beats (in a
 * collective or not), and now and then everything else a rank sends or a
 * frame the model must refuse: phases (a pause of every rank, a resume,
 * an error), logs, evals, an info, a checkpoint, a bye, another rank's
 * message, a rank outside the world, a command. */
static void burst_msg(Msg *m, unsigned k, int rank, int world, int64_t *step, int64_t *seq, int64_t wall)
{
    unsigned what = k % 100;
    if (what < 40) {
        msg_init(m, MSG_STEP);
        /* forward one or a few, now and then the same again or back (a restart) */
        step[rank] += what < 34 ? 1 : what < 37 ? 3 : what < 39 ? 0 : -5;
        if (step[rank] < 1) step[rank] = 1;
        m->u.step.step = step[rank];
        m->u.step.epoch = step[rank] / 40 + (what == 38); /* an epoch that disagrees, now and then */
        m->u.step.samples = 64 * step[rank];
        m->u.step.loss = what == 39 ? NAN : 1.0 / (double)(1 + step[rank]);
        m->u.step.step_ms = 10 + what % 3;
        m->u.step.comm_ms = 2;
        m->u.step.drops = (uint64_t)(k % 7 == 0);
    } else if (what < 80) {
        msg_init(m, MSG_COLL);
        m->u.coll.seq = ++seq[rank];
        snprintf(m->u.coll.op, sizeof m->u.coll.op, "%s", what == 79 ? "broadcast" : "allreduce");
        m->u.coll.bucket = (int32_t)(what % 3) - (what == 78);
        m->u.coll.step = step[rank];
        m->u.coll.bytes = 1 << 20;
        m->u.coll.enq_ns = wall - 3 * MS - (int64_t)(k % 5) * MS;
        m->u.coll.start_ns = what % 9 ? wall - 2 * MS : 0;
        m->u.coll.done_ns = wall - (int64_t)(k % 4) * 100000;
        m->u.coll.algbw_gbs = 1.0 + what % 4;
        m->u.coll.busbw_gbs = 1.5;
    } else if (what < 90) {
        msg_init(m, MSG_BEAT);
        m->u.beat.step = step[rank];
        m->u.beat.phase = PHASE_TRAIN;
        if (what % 2) {
            m->u.beat.coll_seq = seq[rank] + 1;
            snprintf(m->u.beat.coll_op, sizeof m->u.beat.coll_op, "allreduce");
            m->u.beat.coll_since_ns = wall - 2 * SEC;
        }
        if (what == 89) snprintf(m->u.beat.where, sizeof m->u.beat.where, "t.py:9 step");
    } else if (what < 93) {
        msg_init(m, MSG_PHASE);
        m->u.phase.phase = what == 90 ? PHASE_PAUSED : what == 91 ? PHASE_TRAIN : PHASE_CHECKPOINT;
    } else if (what == 93) {
        msg_init(m, MSG_LOG);
        snprintf(m->u.log.level, sizeof m->u.log.level, "warn");
        snprintf(m->u.log.text, sizeof m->u.log.text, "line %u", k);
    } else if (what == 94) {
        msg_init(m, MSG_EVAL);
        m->u.eval.epoch = step[rank] / 40;
        m->u.eval.step = step[rank];
        m->u.eval.total = 10;
    } else if (what == 95) {
        msg_init(m, MSG_CKPT);
        m->u.ckpt.step = step[rank];
        m->u.ckpt.ok = true;
    } else if (what == 96) {
        msg_init(m, MSG_CMD);
    } else if (what == 97) {
        msg_init(m, MSG_INFO);
        m->u.info.params = 7;
    } else {
        msg_init(m, MSG_STEP);
        m->u.step.step = 1;
        rank = what == 98 ? world + 3 : (rank + 1) % world; /* outside the world, or another rank's */
    }
    m->rank = rank;
    m->t_ns = wall;
}

/* A burst's messages applied together leave the model as job_apply on
 * each in turn does: bursts of 1-24 messages of every kind (and of other
 * ranks, or none's) at one arrival, frames at one instant, ms or seconds
 * apart, every rank pausing and resuming at a burst's instant, two ranks
 * ending and one starting again. It fails if samples/s's update is put off
 * past a message that reads it (a pause keeps the figure) or skipped at
 * the end, or if a step or a collective goes a way of its own. */
static void test_apply_burst(void)
{
    TEST_BEGIN("apply_burst_leaves_the_model_as_one_message_at_a_time");
    enum { WORLD = 4, MAXB = 24 };
    Job *a = job_new(WORLD, T0), *b = job_new(WORLD, T0);
    int64_t t = T0, step[WORLD] = { 0 }, seq[WORLD] = { 0 };
    for (int r = 0; r < WORLD; r++) {
        job_rank_started(a, r, 100 + r, t);
        job_rank_started(b, r, 100 + r, t);
        Msg m;
        msg_init(&m, MSG_HELLO);
        m.rank = r;
        m.u.hello.pid = 100 + r;
        m.u.hello.world = WORLD;
        snprintf(m.u.hello.host, sizeof m.u.hello.host, "h%d", r % 2);
        t += MS;
        job_apply(a, &m, t, WALL);
        job_apply_burst(b, &m, 1, t, WALL);
        msg_init(&m, MSG_PHASE);
        m.rank = r;
        m.u.phase.phase = PHASE_TRAIN;
        job_apply(a, &m, t, WALL);
        job_apply_burst(b, &m, 1, t, WALL);
    }
    unsigned seed = 11;
    int bad = 0, bursts = 0, pauses = 0;
    char why[256];
    Msg ms[MAXB];
    for (int f = 0; f < 4000 && bad < 3; f++) {
        seed = seed * 1103515245u + 12345u;
        unsigned k = (seed >> 16) % 1000;
        t += k < 200 ? 0 : k < 700 ? 3 * MS : k < 950 ? 60 * MS : k < 990 ? 400 * MS : 2500 * MS;
        int64_t wall = WALL + (t - T0);
        int n = 0, r = (int)((seed >> 8) % WORLD);
        if (f % 400 == 200) { /* every rank pauses, then trains again, at this instant */
            for (int q = 0; q < WORLD; q++) {
                msg_init(&ms[n], MSG_PHASE);
                ms[n].rank = q;
                ms[n++].u.phase.phase = PHASE_PAUSED;
            }
            for (int q = 0; q < 3; q++) burst_msg(&ms[n++], q * 7, r, WORLD, step, seq, wall);
            msg_init(&ms[n], MSG_PHASE);
            ms[n].rank = r;
            ms[n++].u.phase.phase = PHASE_TRAIN;
            pauses++;
        }
        for (int q = 1 + (int)((seed >> 4) % 20); q > 0 && n < MAXB; q--) {
            seed = seed * 1103515245u + 12345u;
            burst_msg(&ms[n++], (seed >> 12) % 1000, r, WORLD, step, seq, wall);
        }
        for (int i = 0; i < n; i++) job_apply(a, &ms[i], t, wall);
        job_apply_burst(b, ms, n, t, wall);
        bursts++;
        if (jobs_differ(a, b, t, why, sizeof why)) {
            bad++;
            CHECK(false, "burst %d (%d messages): %s", f, n, why);
        }
        if (f == 3000) /* two ranks end, one comes back */
            for (int q = 0; q < 2; q++) {
                job_rank_exited(a, q, 100 + q, 0, NULL, t, wall);
                job_rank_exited(b, q, 100 + q, 0, NULL, t, wall);
            }
        if (f == 3100) {
            job_restart(a, t);
            job_restart(b, t);
        }
    }
    CHECK(bad == 0 && bursts > 3000 && pauses >= 9 && a->n_evals > 0 && a->ckpts > 0, "%d bad, %d bursts, %d pauses",
          bad, bursts, pauses);
    job_apply_burst(b, ms, 0, t, WALL); /* nothing: nothing changes */
    CHECK(!jobs_differ(a, b, t, why, sizeof why), "an empty burst: %s", why);
    job_free(&a);
    job_free(&b);
    TEST_END();
}

/* ---- the step every rank has reached, against the scan it replaced ---- */

/* Job.step, Job.epoch and the count at the minimum as the model kept them
 * before it knew the least step past the minimum: a rescan whenever the
 * last rank at the minimum left it. */
typedef struct {
    bool have[8];
    int64_t step[8], epoch[8];
    int n_stepped, count;
    int64_t min, min_epoch;
} RefMin;

static void ref_min_scan(RefMin *m, int world)
{
    bool any = false;
    m->count = 0;
    m->min = m->min_epoch = 0;
    for (int i = 0; i < world; i++) {
        if (!m->have[i]) continue;
        if (!any || m->step[i] < m->min) {
            any = true;
            m->min = m->step[i];
            m->min_epoch = m->epoch[i];
            m->count = 1;
        } else if (m->step[i] == m->min) {
            m->count++;
            if (m->epoch[i] < m->min_epoch) m->min_epoch = m->epoch[i];
        }
    }
}

static void ref_min_step(RefMin *m, int world, int r, int64_t s, int64_t e)
{
    bool had = m->have[r];
    int64_t old = m->step[r];
    m->have[r] = true;
    m->step[r] = s;
    m->epoch[r] = e;
    if (!had) {
        m->n_stepped++;
        if (m->n_stepped == 1 || s < m->min) {
            m->min = s;
            m->min_epoch = e;
            m->count = 1;
        } else if (s == m->min) {
            m->count++;
        }
        return;
    }
    if (s < old) {
        ref_min_scan(m, world);
        return;
    }
    if (old == m->min && s != old && --m->count <= 0) ref_min_scan(m, world);
}

/* Job.step and Job.epoch after every step are what the rescan gave: bursts
 * of one rank's steps, rounds in lockstep, ranks that start late (ahead
 * and behind), a rank going back, the same step again, epochs that differ
 * at one step. It fails if the least step past the minimum is not kept
 * (a rank reaching it would count alone). */
static void test_step_min_as_before(void)
{
    TEST_BEGIN("step_min_as_the_rescan_gave_it");
    enum { WORLD = 6 };
    unsigned seed = 21;
    int bad = 0, checked = 0;
    for (int run = 0; run < 40 && bad < 3; run++) {
        Job *j = job_new(WORLD, T0);
        RefMin ref;
        memset(&ref, 0, sizeof ref);
        int64_t t = T0, next[WORLD];
        for (int r = 0; r < WORLD; r++) next[r] = 1 + (run % 3) * (r % 3) * 4; /* some start ahead */
        for (int n = 0; n < 600; n++) {
            seed = seed * 1103515245u + 12345u;
            unsigned k = (seed >> 16) % 1000;
            int r = (int)((seed >> 5) % WORLD);
            if (run % 4 == 1 && r >= WORLD - 2 && n < 200) continue; /* late starters */
            int burst = k < 500 ? 1 : 1 + (int)(k % 6);
            for (int q = 0; q < burst; q++) {
                int64_t s = next[r];
                next[r] += k % 97 == 0 ? -7 : k % 89 == 0 ? 0 : 1;
                if (next[r] < 1) next[r] = 1;
                int64_t e = s / 25 + (k % 61 == 0);
                Msg m;
                msg_init(&m, MSG_STEP);
                m.rank = r;
                m.u.step.step = s;
                m.u.step.epoch = e;
                m.u.step.samples = 64 * s;
                m.u.step.loss = 1.0;
                job_apply(j, &m, t += MS, WALL);
                ref_min_step(&ref, WORLD, r, s, e);
                checked++;
                if ((j->step != ref.min || j->epoch != ref.min_epoch) && bad++ < 3)
                    CHECK(false, "run %d message %d: step %lld epoch %lld, the rescan %lld %lld", run, n,
                          (long long)j->step, (long long)j->epoch, (long long)ref.min, (long long)ref.min_epoch);
            }
        }
        job_free(&j);
    }
    CHECK(bad == 0 && checked > 20000, "%d of %d differ", bad, checked);
    TEST_END();
}

static void test_rank_histories(void)
{
    TEST_BEGIN("rank_histories_nodes_rate");
    Job *j = job_new(3, T0);
    int64_t t = j->start_ns;
    Msg m;
    for (int r = 0; r < 3; r++) {
        msg_init(&m, MSG_HELLO);
        m.rank = r;
        snprintf(m.u.hello.host, sizeof m.u.hello.host, "%s", r < 2 ? "alpha" : "beta");
        job_apply(j, &m, t += MS, WALL);
    }
    CHECK(j->nodes == 2, "nodes %d", j->nodes);
    send_phase(j, 1, PHASE_INIT, NULL, t += MS);
    send_phase(j, 1, PHASE_TRAIN, NULL, t += MS);
    const JobPhaseRec *p0 = job_rank_phase_at(&j->ranks[1], 0), *p1 = job_rank_phase_at(&j->ranks[1], 1);
    CHECK(p0 && p0->phase == PHASE_TRAIN && p1 && p1->phase == PHASE_INIT && p0->since_ns == t, "phase history");
    for (int i = 0; i < JOB_RANK_LOGS + 2; i++) {
        msg_init(&m, MSG_LOG);
        m.rank = 1;
        snprintf(m.u.log.text, sizeof m.u.log.text, "line %d", i);
        job_apply(j, &m, t += MS, WALL);
    }
    const JobLogRec *l = job_rank_log_at(&j->ranks[1], 0);
    CHECK(l && strcmp(l->text, "line 9") == 0 && job_rank_log_at(&j->ranks[1], JOB_RANK_LOGS) == NULL, "log ring");
    coll(j, 1, 3, 0, 1, 0, 2.5, t += MS);
    const JobCollRec *c = job_rank_coll_at(&j->ranks[1], 0);
    CHECK(c && c->c.seq == 3 && fabs(c->ms - 2.5) < 1e-9, "rank collective ring");
    /* 10 steps/s of 64 samples: 640 samples/s, then nothing for 5 s */
    for (int s = 1; s <= 20; s++) send_step_ms(j, 1, s, 1.0, 10, t += 100 * MS);
    double sps = job_rank_samples_per_s(&j->ranks[1], t);
    CHECK(sps > 630 && sps < 650, "samples/s %.1f", sps);
    CHECK(job_rank_samples_per_s(&j->ranks[1], t + 5 * SEC) == 0, "rate of a quiet rank not 0");
    CHECK(j->ranks[1].loss_hist.len == 20 && j->loss_all.len == 20, "loss history len %d", j->ranks[1].loss_hist.len);
    job_free(&j);
    TEST_END();
}

/* A message cut at its byte count (a "%.200s" of a phase's detail) never
 * leaves half a UTF-8 character: gloo's message with a non-ASCII character
 * at the cut reached the screen and --json as two bad bytes. */
static void test_cut_utf8(void)
{
    TEST_BEGIN("a_cut_message_keeps_whole_utf8_characters");
    int64_t t;
    Job *j = started_job(&t);
    char detail[256];
    memset(detail, 'x', 199);
    snprintf(detail + 199, sizeof detail - 199, "\xc3\xa9 and more"); /* é across bytes 200-201 */
    send_phase(j, 1, PHASE_ERROR, detail, t + 1);
    const JobEvent *e = job_event_at(j, 0);
    CHECK(e && strstr(e->text, "xxxxxxxx"), "event '%s'", e ? e->text : "(none)");
    bool ok = true;
    for (const unsigned char *p = (const unsigned char *)(e ? e->text : ""); *p;) {
        size_t k = *p < 0x80 ? 1 : utf8_seq(p, strlen((const char *)p));
        if (!k) {
            ok = false;
            break;
        }
        p += k;
    }
    CHECK(ok, "ill-formed UTF-8 in '%s'", e ? e->text : "");
    CHECK(e && !strchr(e->text, '\xc3'), "half of the character kept: '%s'", e ? e->text : "");
    /* whole characters stay */
    send_phase(j, 0, PHASE_ERROR, "gloo: caf\xc3\xa9 \xe2\x9c\x93", t + 2);
    e = job_event_at(j, 0);
    CHECK(e && strstr(e->text, "caf\xc3\xa9 \xe2\x9c\x93"), "event '%s'", e ? e->text : "(none)");
    job_free(&j);
    TEST_END();
}

int main(void)
{
    test_new_free();
    test_info();
    test_clean_run();
    test_step_min();
    test_samples_per_s();
    test_samples_per_s_matches_the_walk();
    test_rank_rate_kept();
    test_coll_shard_ckpt();
    test_log_and_error_phase();
    test_signal_exit();
    test_exit_without_bye();
    test_bare_exits();
    test_bad_rank();
    test_event_ring();
    test_event_fold();
    test_state_edges();
    test_pause_outcome();
    test_evals();
    test_collectives();
    test_coll_transfer();
    test_coll_mismatch();
    test_shard_map();
    test_shown_steps();
    test_step_parts();
    test_rate_pause();
    test_stats_outliers_order();
    test_straggler();
    test_series();
    test_series_as_before();
    test_samples_per_s_in_bursts();
    test_allreduce_bucket_op();
    test_apply_burst();
    test_step_min_as_before();
    test_rank_histories();
    test_cut_utf8();
    CHECK_EXIT();
}
