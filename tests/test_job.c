/* test_job.c — the job model driven by hand-built messages: phases and job
 * state, step minimum, samples/s, collectives, shards, checkpoints, exits
 * and verdicts, bad ranks, the events ring. No sockets, no terminal.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "check.h"
#include "job.h"

#define MS 1000000LL
#define SEC 1000000000LL

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
    job_apply(j, &m, t);
}

static void send_phase(Job *j, int rank, Phase p, const char *detail, int64_t t)
{
    Msg m;
    msg_init(&m, MSG_PHASE);
    m.rank = rank;
    m.u.phase.phase = p;
    if (detail)
        snprintf(m.u.phase.detail, sizeof m.u.phase.detail, "%s", detail);
    job_apply(j, &m, t);
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
    job_apply(j, &m, t);
}

static void send_bye(Job *j, int rank, int status, int64_t step, int64_t t)
{
    Msg m;
    msg_init(&m, MSG_BYE);
    m.rank = rank;
    m.u.bye.status = status;
    m.u.bye.step = step;
    job_apply(j, &m, t);
}

/* Is there an event (any age still kept) whose text contains s? */
static const JobEvent *find_event(const Job *j, const char *s)
{
    for (int i = 0; job_event_at(j, i); i++)
        if (strstr(job_event_at(j, i)->text, s))
            return job_event_at(j, i);
    return NULL;
}

/* Two ranks through launch, hello and the phases up to training. */
static Job *started_job(int64_t *t)
{
    Job *j = job_new(2);
    *t = j->start_ns;
    for (int r = 0; r < 2; r++)
        job_rank_started(j, r, 1000 + r, *t);
    for (int r = 0; r < 2; r++)
        send_hello(j, r, 1000 + r, *t += MS);
    Phase ps[] = {PHASE_INIT, PHASE_RENDEZVOUS, PHASE_BROADCAST, PHASE_TRAIN};
    for (unsigned i = 0; i < sizeof ps / sizeof ps[0]; i++)
        for (int r = 0; r < 2; r++)
            send_phase(j, r, ps[i], NULL, *t += MS);
    return j;
}

static void test_new_free(void)
{
    TEST_BEGIN("new_free");
    CHECK(job_new(0) == NULL, "world 0 accepted");
    CHECK(job_new(JOB_MAX_RANKS + 1) == NULL, "world above max accepted");
    Job *j = job_new(3);
    CHECK(j && j->world == 3 && j->state == JOB_STARTING, "bad new job");
    CHECK(j && job_event_at(j, 0) == NULL && job_event_nth(j, 0) == NULL, "events in a new job");
    job_free(&j);
    CHECK(j == NULL, "job_free left the pointer");
    job_free(&j);                    /* twice is harmless */
    job_free(NULL);
    TEST_END();
}

static void test_clean_run(void)
{
    TEST_BEGIN("clean_run_two_ranks");
    Job *j = job_new(2);
    int64_t t = j->start_ns;
    job_rank_started(j, 0, 1000, t);
    job_rank_started(j, 1, 1001, t);
    send_hello(j, 0, 1000, t += MS);
    CHECK(strcmp(j->model, "mlp:784,256,256,10") == 0 && j->max_steps == 938 && j->params == 269322,
          "job-wide fields not taken from the first hello: model '%s' max %lld", j->model,
          (long long)j->max_steps);
    CHECK(j->ranks[0].state == RANK_ALIVE && j->ranks[1].state == RANK_WAITING, "rank states after one hello");
    CHECK(find_event(j, "rank 0 hello pid 1000 on node0 (cpu, gloo)"), "hello event missing: '%s'",
          job_event_at(j, 0) ? job_event_at(j, 0)->text : "(none)");
    send_hello(j, 1, 1001, t += MS);
    CHECK(job_alive(j) == 2, "alive %d", job_alive(j));

    Phase ps[] = {PHASE_INIT, PHASE_RENDEZVOUS, PHASE_BROADCAST, PHASE_TRAIN};
    for (int i = 0; i < 4; i++)
        send_phase(j, 0, ps[i], NULL, t += MS);
    CHECK(j->state == JOB_STARTING, "RUNNING before rank 1 trains: %s", job_state_name(j->state));
    for (int i = 0; i < 3; i++)
        send_phase(j, 1, ps[i], NULL, t += MS);
    CHECK(find_event(j, "rank 1: rendezvous -> broadcast"), "phase change event missing");
    CHECK(j->ranks[1].phase == PHASE_BROADCAST && j->ranks[1].phase_since_ns == t, "phase/since not kept");
    uint64_t before = j->ev_total;
    send_phase(j, 1, PHASE_BROADCAST, NULL, t += MS);   /* repeat: no new event */
    CHECK(j->ev_total == before, "repeated phase made an event");
    send_phase(j, 1, PHASE_TRAIN, NULL, t += MS);
    CHECK(j->state == JOB_RUNNING, "not RUNNING once both train: %s", job_state_name(j->state));

    for (int s = 1; s <= 10; s++)
        for (int r = 0; r < 2; r++)
            send_step(j, r, 0, s, 2.0 - 0.1 * s - 0.01 * r, t += 5 * MS);
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
    job_rank_exited(j, 0, 1000, W_EXITCODE(0, 0), NULL, t += MS);
    CHECK(j->state == JOB_STOPPING, "finished before rank 1 exited: %s", job_state_name(j->state));
    CHECK(!job_all_exited(j), "all exited with rank 1 alive");
    uint64_t v = j->version;
    job_rank_exited(j, 1, 1001, W_EXITCODE(0, 0), NULL, t += MS);
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
    Job *j = job_new(3);
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
    send_step(j, 2, 1, 7, 1.0, t += MS);   /* rank 2 (never stepped before) above min */
    CHECK(j->step == 6 && j->epoch == 0, "step %lld epoch %lld", (long long)j->step, (long long)j->epoch);
    send_step(j, 0, 1, 7, 1.0, t += MS);
    CHECK(j->step == 6, "one rank still at 6: %lld", (long long)j->step);
    send_step(j, 1, 1, 8, 1.0, t += MS);
    CHECK(j->step == 7 && j->epoch == 1, "step %lld epoch %lld", (long long)j->step, (long long)j->epoch);
    send_step(j, 2, 0, 2, 1.0, t += MS);   /* backwards (restart) */
    CHECK(j->step == 2 && j->epoch == 0, "backwards step: %lld", (long long)j->step);
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
        for (int r = 0; r < 2; r++)
            send_step(j, r, 0, s, 1.0, t0 + s * 100 * MS);
    CHECK(j->samples_per_s > 1280 * 0.95 && j->samples_per_s < 1280 * 1.05, "samples/s %.1f, want ~1280",
          j->samples_per_s);
    /* twice as fast from here: the window forgets the old pace within ~2 s */
    int64_t t1 = t0 + 40 * 100 * MS;
    for (int s = 1; s <= 60; s++)
        for (int r = 0; r < 2; r++)
            send_step(j, r, 0, 40 + s, 1.0, t1 + s * 50 * MS);
    CHECK(j->samples_per_s > 2560 * 0.95 && j->samples_per_s < 2560 * 1.05, "samples/s %.1f, want ~2560",
          j->samples_per_s);
    /* steps stop, heartbeats go on: the rate falls to zero */
    int64_t t2 = t1 + 60 * 50 * MS;
    for (int k = 1; k <= 30; k++) {
        Msg m;
        msg_init(&m, MSG_BEAT);
        m.rank = k % 2;
        job_apply(j, &m, t2 + k * 100 * MS);
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
    m.u.coll.done_ns = 1000 * SEC + 1 * MS + 1500000;  /* 1.5 ms after start */
    job_apply(j, &m, t += MS);
    CHECK(j->ranks[1].have_coll && j->ranks[1].coll.seq == 7, "coll not kept");
    CHECK(j->ranks[1].coll_ms > 1.499 && j->ranks[1].coll_ms < 1.501, "coll_ms %.3f", j->ranks[1].coll_ms);
    CHECK(job_rank_allreduce_ms(&j->ranks[1]) == j->ranks[1].coll_ms, "allreduce ms not the collective's");

    int64_t idx[40];
    for (int i = 0; i < 40; i++)
        idx[i] = 1000 - i;
    msg_init(&m, MSG_SHARD);
    m.rank = 0;
    m.u.shard.epoch = 2;
    m.u.shard.num_samples = 30001;
    m.u.shard.total_size = 60002;
    m.u.shard.padding = 2;
    m.u.shard.n_idx = 40;
    m.u.shard.idx = idx;             /* borrowed: no msg_done */
    job_apply(j, &m, t += MS);
    const JobRank *r0 = &j->ranks[0];
    CHECK(r0->have_shard && r0->shard_epoch == 2 && r0->num_samples == 30001 && r0->total_size == 60002 &&
          r0->padding == 2, "shard summary");
    CHECK(r0->n_first == JOB_SHARD_FIRST && r0->first_idx[0] == 1000 && r0->first_idx[JOB_SHARD_FIRST - 1] ==
          1000 - (JOB_SHARD_FIRST - 1), "shard first indices: n %d", r0->n_first);

    msg_init(&m, MSG_CKPT);
    m.rank = 0;
    m.u.ckpt.ok = true;
    m.u.ckpt.step = 100;
    m.u.ckpt.ms = 42.4;
    m.u.ckpt.bytes = 3250000;
    snprintf(m.u.ckpt.path, sizeof m.u.ckpt.path, "ckpt/step-00000100");
    job_apply(j, &m, t += MS);
    CHECK(find_event(j, "checkpoint step 100 written by rank 0 in 42 ms (3.2 MB) -> ckpt/step-00000100") ||
          find_event(j, "checkpoint step 100 written by rank 0 in 42 ms (3.3 MB) -> ckpt/step-00000100"),
          "ckpt event: '%s'", job_event_at(j, 0)->text);
    CHECK(j->last_ckpt_step == 100 && strcmp(j->last_ckpt_path, "ckpt/step-00000100") == 0 && j->ckpts == 1,
          "last ckpt not kept");
    m.u.ckpt.ok = false;
    m.u.ckpt.step = 200;
    snprintf(m.u.ckpt.error, sizeof m.u.ckpt.error, "No space left on device");
    job_apply(j, &m, t += MS);
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
    const char *lv[] = {"info", "warn", "error"};
    JobEventLevel want[] = {EV_INFO, EV_WARN, EV_ERROR};
    for (int i = 0; i < 3; i++) {
        Msg m;
        msg_init(&m, MSG_LOG);
        m.rank = 1;
        snprintf(m.u.log.level, sizeof m.u.log.level, "%s", lv[i]);
        snprintf(m.u.log.text, sizeof m.u.log.text, "message %d", i);
        job_apply(j, &m, t += MS);
        char want_text[32];
        snprintf(want_text, sizeof want_text, "message %d", i);
        const JobEvent *e = job_event_at(j, 0);
        CHECK(e && e->level == want[i] && e->rank == 1 && strcmp(e->text, want_text) == 0,
              "log event %d: '%s'", i, e ? e->text : "");
        CHECK(e && e->mono_ns == t, "event time is not the arrival time");
    }
    send_phase(j, 0, PHASE_ERROR, "allreduce: Connection reset by peer", t += MS);
    const JobEvent *e = job_event_at(j, 0);
    CHECK(e && e->level == EV_ERROR && strstr(e->text, "rank 0: train -> error") &&
          strstr(e->text, "Connection reset by peer"), "error phase event: '%s'", e ? e->text : "");
    send_phase(j, 0, PHASE_DESTROYING, NULL, t += MS);
    CHECK(strcmp(j->ranks[0].detail, "allreduce: Connection reset by peer") == 0, "error detail lost: '%s'",
          j->ranks[0].detail);
    job_rank_exited(j, 0, 1000, W_EXITCODE(1, 0), NULL, t += MS);
    char verdict[256];
    job_verdict(j, verdict, sizeof verdict);
    CHECK(strstr(verdict, "job failed: rank 0 exit 1") && strstr(verdict, "Connection reset by peer"),
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
        for (int r = 0; r < 2; r++)
            send_step(j, r, 0, s, 1.0, t += MS);
    job_rank_exited(j, 1, 1001, W_EXITCODE(0, SIGKILL), NULL, t += MS);
    const JobRank *r1 = &j->ranks[1];
    CHECK(r1->state == RANK_FAILED, "rank state %s", rank_state_name(r1->state));
    CHECK(strcmp(r1->how_ended, "signal 9 (Killed)") == 0, "how_ended '%s'", r1->how_ended);
    CHECK(j->state == JOB_FAILED, "job %s after a killed rank", job_state_name(j->state));
    CHECK(j->first_failed == 1, "first_failed %d", j->first_failed);
    const JobEvent *e = job_event_at(j, 0);
    CHECK(e && e->level == EV_ERROR && e->rank == 1 && strstr(e->text, "signal 9 (Killed)") &&
          strstr(e->text, "step 57"), "exit event: '%s'", e ? e->text : "");
    char verdict[256];
    job_verdict(j, verdict, sizeof verdict);
    CHECK(strcmp(verdict, "job failed: rank 1 signal 9 (Killed) at step 57") == 0, "verdict '%s'", verdict);
    /* the survivor then dies of the broken link: the verdict still names rank 1 */
    job_rank_exited(j, 0, 1000, W_EXITCODE(1, 0), NULL, t += MS);
    CHECK(j->state == JOB_FAILED, "state moved off FAILED");
    job_verdict(j, verdict, sizeof verdict);
    CHECK(strncmp(verdict, "job failed: rank 1 signal 9 (Killed) at step 57", 46) == 0 &&
          strstr(verdict, "2 ranks failed"), "verdict '%s'", verdict);
    job_free(&j);

    j = started_job(&t);
    job_rank_exited(j, 0, 1000, W_EXITCODE(0, SIGTERM), "SIGTERM by ddptop", t += MS);
    CHECK(strcmp(j->ranks[0].how_ended, "SIGTERM by ddptop") == 0, "how text not used: '%s'",
          j->ranks[0].how_ended);
    CHECK(strstr(job_event_at(j, 0)->text, "before its first step"), "event '%s'", job_event_at(j, 0)->text);
    job_free(&j);
    TEST_END();
}

static void test_exit_without_bye(void)
{
    TEST_BEGIN("exit0_without_bye_fails");
    int64_t t;
    Job *j = started_job(&t);
    send_bye(j, 0, 0, 0, t += MS);
    job_rank_exited(j, 0, 1000, W_EXITCODE(0, 0), NULL, t += MS);
    CHECK(j->ranks[0].state == RANK_EXITED_OK, "rank 0 with bye: %s", rank_state_name(j->ranks[0].state));
    CHECK(j->state != JOB_FAILED, "failed after one clean exit");
    job_rank_exited(j, 1, 1001, W_EXITCODE(0, 0), NULL, t += MS);
    CHECK(j->ranks[1].state == RANK_FAILED, "exit 0 without bye: %s", rank_state_name(j->ranks[1].state));
    CHECK(j->state == JOB_FAILED, "job %s", job_state_name(j->state));
    CHECK(strstr(j->ranks[1].how_ended, "exit 0") && strstr(j->ranks[1].how_ended, "without bye"),
          "how_ended '%s'", j->ranks[1].how_ended);
    CHECK(job_all_exited(j) && !job_all_clean(j), "predicates");
    job_free(&j);

    /* bye says failure, exit says 0: not clean either */
    j = started_job(&t);
    send_bye(j, 0, 3, 0, t += MS);
    CHECK(job_event_at(j, 0)->level == EV_WARN, "bye with status 3 not flagged");
    job_rank_exited(j, 0, 1000, W_EXITCODE(0, 0), NULL, t += MS);
    CHECK(j->ranks[0].state == RANK_FAILED && strstr(j->ranks[0].how_ended, "bye status 3"),
          "bye status 3: %s '%s'", rank_state_name(j->ranks[0].state), j->ranks[0].how_ended);
    job_free(&j);

    j = started_job(&t);
    send_bye(j, 1, 0, 0, t += MS);
    job_rank_exited(j, 1, 1001, W_EXITCODE(3, 0), NULL, t += MS);
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
    job_apply(j, &m, t += MS);
    CHECK(j->bad_frames == 3, "store message counted as bad");
    /* anything from a good rank refreshes its liveness, even an unknown kind */
    msg_init(&m, MSG_UNKNOWN);
    m.rank = 1;
    job_apply(j, &m, t += 7 * SEC);
    CHECK(j->ranks[1].last_msg_ns == t, "unknown kind did not refresh last_msg_ns");
    CHECK(job_rank_stale(&j->ranks[0], t) && !job_rank_stale(&j->ranks[1], t), "staleness");
    job_free(&j);
    TEST_END();
}

static void test_event_ring(void)
{
    TEST_BEGIN("event_ring_wraps");
    Job *j = job_new(1);
    for (int i = 0; i < JOB_EVENTS + 100; i++)
        job_event(j, i % 3 - 1, EV_INFO, "event %d", i);
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
    char big[1000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    job_event(j, -1, EV_WARN, "%s", big);
    CHECK(strlen(job_event_at(j, 0)->text) == sizeof job_event_at(j, 0)->text - 1, "long event not truncated");
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

    j = job_new(2);
    t = j->start_ns;
    send_hello(j, 0, 10, t += MS);
    Msg m;
    msg_init(&m, MSG_HELLO);
    m.rank = 1;
    m.u.hello.world = 4;
    snprintf(m.u.hello.model, sizeof m.u.hello.model, "mlp:784,10");
    m.u.hello.params = 7850;
    job_apply(j, &m, t += MS);
    CHECK(strcmp(j->model, "mlp:784,256,256,10") == 0, "second hello overwrote the job's model");
    CHECK(find_event(j, "says world size 4") && find_event(j, "runs model mlp:784,10"),
          "mismatch warnings missing");
    /* a job that already failed stays failed */
    job_rank_exited(j, 0, 10, W_EXITCODE(0, SIGSEGV), NULL, t += MS);
    job_set_stopping(j);
    send_phase(j, 1, PHASE_STOPPING, NULL, t += MS);
    CHECK(j->state == JOB_FAILED, "FAILED overwritten by %s", job_state_name(j->state));
    CHECK(strstr(j->ranks[0].how_ended, "signal 11"), "how '%s'", j->ranks[0].how_ended);
    job_free(&j);
    TEST_END();
}

int main(void)
{
    test_new_free();
    test_clean_run();
    test_step_min();
    test_samples_per_s();
    test_coll_shard_ckpt();
    test_log_and_error_phase();
    test_signal_exit();
    test_exit_without_bye();
    test_bad_rank();
    test_event_ring();
    test_state_edges();
    CHECK_EXIT();
}
