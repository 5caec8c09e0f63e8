/* test_job_outcome.c — how a job ended beyond its ranks' exits
 * (job_outcome.c): a lost checkpoint is a failure with its own verdict and
 * "ok" false though every rank exits 0; a stop signal's run says "stopped
 * by Ctrl-C at step S" and whether the checkpoint was written; a rank the
 * ladder had to end stays a failure; a signal after the end changes
 * nothing; a lost checkpoint a later one superseded is only a warning; a
 * rank whose bye says it refused to run as launched ends the job "job
 * refused: WHY" (exit 2 in run/loop.c), not a failure. No sockets, no terminal.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "check.h"
#include "model/job.h"

#define MS   1000000LL
#define T0   (1000LL * 1000000000LL)
#define WALL (1700000000LL * 1000000000LL)

static void apply(Job *j, Msg *m, int64_t *t) { job_apply(j, m, *t += MS, WALL); }

/* Two ranks (pids pid, pid+1): hello, training, steps first..last. */
static void attempt(Job *j, int pid, int64_t first, int64_t last, int64_t *t)
{
    Msg m;
    for (int r = 0; r < 2; r++) {
        job_rank_started(j, r, pid + r, *t);
        msg_init(&m, MSG_HELLO);
        m.rank = r;
        m.u.hello.world = 2;
        m.u.hello.pid = pid + r;
        apply(j, &m, t);
        msg_init(&m, MSG_PHASE);
        m.rank = r;
        m.u.phase.phase = PHASE_TRAIN;
        apply(j, &m, t);
    }
    for (int64_t s = first; s <= last; s++)
        for (int r = 0; r < 2; r++) {
            msg_init(&m, MSG_STEP);
            m.rank = r;
            m.u.step.step = s;
            m.u.step.loss = 1.0;
            apply(j, &m, t);
        }
}

static Job *trained(int64_t last, int64_t *t)
{
    Job *j = job_new(2, T0);
    *t = T0;
    attempt(j, 100, 1, last, t);
    return j;
}

static void ckpt(Job *j, int64_t step, bool ok, int64_t *t)
{
    Msg m;
    msg_init(&m, MSG_CKPT);
    m.rank = 0;
    m.u.ckpt.ok = ok;
    m.u.ckpt.step = step;
    snprintf(m.u.ckpt.path, sizeof m.u.ckpt.path, "ck/step-%08lld", (long long)step);
    if (!ok) snprintf(m.u.ckpt.error, sizeof m.u.ckpt.error, "No space left on device");
    apply(j, &m, t);
}

/* Every rank (pids pid, pid+1) says bye 0 and exits 0 (or is killed, for
 * `killed`). */
static void end_pids(Job *j, int pid, int64_t *t, int killed)
{
    Msg m;
    for (int r = 0; r < 2; r++) {
        if (r == killed) {
            job_rank_exited(j, r, pid + r, SIGKILL, "SIGKILL by ddptop", *t += MS, WALL);
            continue;
        }
        msg_init(&m, MSG_BYE);
        m.rank = r;
        apply(j, &m, t);
        job_rank_exited(j, r, pid + r, 0, NULL, *t += MS, WALL);
    }
}

static void end(Job *j, int64_t *t, int killed) { end_pids(j, 100, t, killed); }

static bool has_event(const Job *j, const char *text)
{
    for (uint64_t i = 0; i < j->ev_total; i++) {
        const JobEvent *e = job_event_nth(j, i);
        if (e && strstr(e->text, text)) return true;
    }
    return false;
}

/* --max-restarts: step 20 lost in the first attempt, which then failed; the
 * restart resumes from step 10 and writes steps 20 and 30: the lost one is
 * superseded, a warning, and the run ends clean (exit 0). Within one
 * attempt, a later step's checkpoint supersedes too; the same step written
 * by another rank of the same attempt does not. */
static void test_superseded(void)
{
    TEST_BEGIN("lost_checkpoint_superseded_by_a_later_one");
    int64_t t;
    Job *j = trained(20, &t);
    ckpt(j, 10, true, &t);
    ckpt(j, 20, false, &t);
    end(j, &t, 1);
    CHECK(job_outcome(j) == JOB_END_FAILED, "outcome %d", job_outcome(j));
    job_restart(j, t);
    attempt(j, 200, 11, 30, &t);
    ckpt(j, 10, true, &t); /* an older state: the lost one still is */
    CHECK(j->ckpts_lost == 1, "step 10 superseded step 20");
    ckpt(j, 20, true, &t);
    ckpt(j, 30, true, &t);
    end_pids(j, 200, &t, -1);
    char v[512];
    job_verdict(j, v, sizeof v);
    CHECK(job_ok(j) && job_outcome(j) == JOB_END_OK && j->state == JOB_DONE, "outcome %d verdict '%s'", job_outcome(j),
          v);
    CHECK(!strstr(v, "checkpoint lost"), "verdict '%s'", v);
    CHECK(has_event(j, "checkpoint step 20 superseded: step 20 lost earlier"), "no warning for the superseded one");
    job_free(&j);

    j = trained(30, &t);
    ckpt(j, 20, false, &t);
    ckpt(j, 30, true, &t);
    end(j, &t, -1);
    CHECK(job_ok(j), "a lost step 20 then a written step 30 is not ok: outcome %d", job_outcome(j));
    job_free(&j);

    j = trained(20, &t);
    ckpt(j, 20, false, &t);
    ckpt(j, 20, true, &t);
    end(j, &t, -1);
    CHECK(job_outcome(j) == JOB_END_CKPT_LOST, "the same step in the same attempt superseded it: outcome %d",
          job_outcome(j));
    job_free(&j);
    TEST_END();
}

static void test_lost_ckpt(void)
{
    TEST_BEGIN("lost_checkpoint_fails_the_run");
    int64_t t;
    Job *j = trained(20, &t);
    ckpt(j, 20, false, &t);
    end(j, &t, -1);
    char v[512];
    job_verdict(j, v, sizeof v);
    CHECK(job_all_clean(j) && !job_ok(j) && job_outcome(j) == JOB_END_CKPT_LOST, "outcome %d", job_outcome(j));
    CHECK(!strncmp(v, "job failed: checkpoint lost: step 20 was not written (No space left on device)", 78),
          "verdict '%s'", v);
    CHECK(!strstr(v, "ended cleanly") && j->state == JOB_FAILED, "verdict '%s' state %s", v, job_state_name(j->state));
    job_free(&j);
    /* the same run with its checkpoint written: ok */
    j = trained(20, &t);
    ckpt(j, 20, true, &t);
    end(j, &t, -1);
    CHECK(job_ok(j) && j->state == JOB_DONE, "a written checkpoint is not ok");
    job_free(&j);
    TEST_END();
}

static void test_interrupted(void)
{
    TEST_BEGIN("interrupted_says_so");
    int64_t t;
    Job *j = trained(57, &t);
    job_set_interrupted(j, "Ctrl-C");
    ckpt(j, 57, true, &t);
    end(j, &t, -1);
    char v[512];
    job_verdict(j, v, sizeof v);
    CHECK(!job_ok(j) && job_outcome(j) == JOB_END_INTERRUPTED, "outcome %d", job_outcome(j));
    CHECK(!strcmp(v, "stopped by Ctrl-C at step 57, checkpoint written: ck/step-00000057"), "verdict '%s'", v);
    job_free(&j);

    j = trained(12, &t);
    job_set_interrupted(j, "SIGTERM");
    ckpt(j, 12, false, &t);
    end(j, &t, -1);
    job_verdict(j, v, sizeof v);
    CHECK(!strcmp(v, "stopped by SIGTERM at step 12, no checkpoint written (step 12 lost: No space left on device)"),
          "verdict '%s'", v);
    job_free(&j);

    /* a rank the ladder had to kill: a failure, whatever the signal */
    j = trained(5, &t);
    job_set_interrupted(j, "SIGTERM");
    end(j, &t, 1);
    CHECK(job_outcome(j) == JOB_END_FAILED, "outcome %d", job_outcome(j));
    job_verdict(j, v, sizeof v);
    CHECK(!strncmp(v, "job failed: rank 1", 18), "verdict '%s'", v);
    job_free(&j);

    /* Ctrl-C once every rank has ended is only leaving */
    j = trained(5, &t);
    end(j, &t, -1);
    job_set_interrupted(j, "Ctrl-C");
    CHECK(job_ok(j), "a signal after the end made it not ok");
    job_free(&j);
    TEST_END();
}

static void test_refused(void)
{
    TEST_BEGIN("a_refusal_is_the_verdict");
    int64_t t = T0;
    Job *j = job_new(2, T0);
    attempt(j, 100, 1, 0, &t); /* hello, no step */
    const char *why = "ddptop run -n 2: the script starts its own ranks (torch.multiprocessing.spawn), ...";
    Msg m;
    for (int r = 0; r < 2; r++) {
        msg_init(&m, MSG_BYE);
        m.rank = r;
        m.u.bye.status = 2;
        snprintf(m.u.bye.refused, sizeof m.u.bye.refused, "%s", why);
        apply(j, &m, &t);
        CHECK(job_outcome(j) == JOB_END_RUNNING, "outcome %d before the exits", job_outcome(j));
    }
    for (int r = 0; r < 2; r++) job_rank_exited(j, r, 100 + r, W_EXITCODE(2, 0), NULL, t += MS, WALL);
    char v[1024];
    job_verdict(j, v, sizeof v);
    CHECK(job_outcome(j) == JOB_END_REFUSED && !job_ok(j), "outcome %d", job_outcome(j));
    CHECK(!strncmp(v, "job refused: ", 13) && !strcmp(v + 13, why), "verdict '%s'", v);
    CHECK(has_event(j, "rank 0 refused to run: ddptop run -n 2"), "no event");
    job_free(&j);

    /* exit 2 with a bye that says nothing (a script's own sys.exit(2)): a failure */
    j = job_new(2, T0);
    attempt(j, 100, 1, 0, &t);
    for (int r = 0; r < 2; r++) {
        msg_init(&m, MSG_BYE);
        m.rank = r;
        m.u.bye.status = 2;
        apply(j, &m, &t);
        job_rank_exited(j, r, 100 + r, W_EXITCODE(2, 0), NULL, t += MS, WALL);
    }
    CHECK(job_outcome(j) == JOB_END_FAILED, "outcome %d", job_outcome(j));
    job_free(&j);
    TEST_END();
}

int main(void)
{
    test_refused();
    test_lost_ckpt();
    test_interrupted();
    test_superseded();
    CHECK_EXIT();
}
