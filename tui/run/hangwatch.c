/* hangwatch.c — live hang verdicts: the model's snapshot (model/hang.c)
 * plus /proc, analysed once a second. See hangwatch.h. */
#include "run/hangwatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launch/procstat.h"

int hangwatch_init(HangWatch *w, int world, double hang_after_s)
{
    memset(w, 0, sizeof *w);
    w->hang_after_ns = (int64_t)(hang_after_s * 1e9);
    w->world = world;
    w->snap = calloc((size_t)world, sizeof *w->snap);
    if (gethostname(w->host, sizeof w->host - 1) != 0) w->host[0] = '\0';
    return w->snap ? 0 : -1;
}

void hangwatch_done(HangWatch *w)
{
    free(w->snap);
    w->snap = NULL;
}

int hangwatch_tick(HangWatch *w, Job *j, const Launcher *l, int64_t mono_ns, int64_t wall_ns)
{
    if (!w->snap || mono_ns < w->next_check_ns) return 0;
    w->next_check_ns = mono_ns + 1000000000LL;
    hang_snapshot(j, mono_ns, w->snap, w->world);
    /* what the model cannot know: each live rank's process as /proc sees it */
    for (int k = 0; l && k < w->world && k < j->world; k++) {
        HangRank *s = &w->snap[k];
        ProcStat ps;
        /* the process that said hello (a child of the launched one for a script that
         * starts its own ranks: run/follow.c), else the one launched */
        pid_t pid = j->ranks[k].pid > 0 ? (pid_t)j->ranks[k].pid : launcher_pid(l, k);
        /* only a process on this machine: another node's pid names some process of ours, or none
         * (a rank launched here, or one whose hello names this host, as a followed rank's does) */
        bool here = launcher_pid(l, k) > 0 || (j->ranks[k].host[0] && !strcmp(j->ranks[k].host, w->host));
        if (!s->exited && here && procstat_read(pid, &ps) == 0) {
            s->proc_state = ps.state;
            snprintf(s->wchan, sizeof s->wchan, "%s", ps.wchan);
        }
        if (hang_rank_silent(s)) job_note_silent(j, k, mono_ns, wall_ns);
    }
    if (!hang_analyze(w->snap, w->world, wall_ns, w->hang_after_ns, &w->last)) {
        w->reported = false;
        return 0;
    }
    w->reported = true;
    return 1;
}
