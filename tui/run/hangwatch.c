/* hangwatch.c — live hang verdicts. See hangwatch.h. */
#include "run/hangwatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch/procstat.h"

int hangwatch_init(HangWatch *w, int world, double hang_after_s)
{
    memset(w, 0, sizeof *w);
    w->hang_after_ns = (int64_t)(hang_after_s * 1e9);
    w->world = world;
    w->snap = calloc((size_t)world, sizeof *w->snap);
    return w->snap ? 0 : -1;
}

void hangwatch_done(HangWatch *w)
{
    free(w->snap);
    w->snap = NULL;
}

int hangwatch_tick(HangWatch *w, const Job *j, const Launcher *l, int64_t mono_ns, int64_t wall_ns)
{
    if (!w->snap || mono_ns < w->next_check_ns) return 0;
    w->next_check_ns = mono_ns + 1000000000LL;
    for (int k = 0; k < w->world && k < j->world; k++) {
        const JobRank *r = &j->ranks[k];
        HangRank *s = &w->snap[k];
        memset(s, 0, sizeof *s);
        s->rank = k;
        s->started = r->hello;
        s->exited = r->state == RANK_EXITED_OK || r->state == RANK_FAILED;
        snprintf(s->how_ended, sizeof s->how_ended, "%s", r->how_ended);
        s->phase = r->phase;
        s->last_step = r->have_step ? r->last.step : 0;
        s->inflight_seq = -1;
        /* A beat naming a collective that has since completed is old news. */
        if (!s->exited && r->have_beat && r->beat.coll_seq >= 0 && r->beat.coll_since_ns > 0 &&
            !(r->have_coll && r->coll.seq >= r->beat.coll_seq)) {
            s->inflight_seq = r->beat.coll_seq;
            snprintf(s->inflight_op, sizeof s->inflight_op, "%s", r->beat.coll_op);
            s->inflight_since_ns = r->beat.coll_since_ns;
        }
        s->silent_ns = r->last_msg_ns ? mono_ns - r->last_msg_ns : -1;
        if (l && !s->exited) {
            ProcStat ps;
            if (procstat_read(launcher_pid(l, k), &ps) == 0) {
                s->proc_state = ps.state;
                snprintf(s->wchan, sizeof s->wchan, "%s", ps.wchan);
            }
        }
    }
    HangReport rep;
    if (!hang_analyze(w->snap, w->world, wall_ns, w->hang_after_ns, &rep)) {
        w->reported = false;
        return 0;
    }
    /* The same hang, only longer, is said once: compare the verdicts past
     * their "(12.3 s)" wait, which grows every second. */
    if (w->reported && rep.seq == w->reported_seq && rep.n_missing == w->reported_missing &&
        !strcmp(rep.verdict + strcspn(rep.verdict, ")"), w->last.verdict + strcspn(w->last.verdict, ")")))
        return 0;
    w->last = rep;
    w->reported = true;
    w->reported_seq = rep.seq;
    w->reported_missing = rep.n_missing;
    return 1;
}
