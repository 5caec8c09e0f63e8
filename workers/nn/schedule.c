/* schedule.c — learning-rate schedules. See schedule.h. */
#include "nn/schedule.h"

#include <math.h>
#include <string.h>

double schedule_lr(const Schedule *s, int64_t step)
{
    double f = 1.0;
    if (step < s->warmup_steps) {
        /* transformers: float(current_step) / float(max(1, num_warmup_steps)) */
        f = (double)step / (double)(s->warmup_steps > 1 ? s->warmup_steps : 1);
    } else if (s->kind == SCHED_COSINE) {
        int64_t span = s->total_steps - s->warmup_steps;
        double progress = (double)(step - s->warmup_steps) / (double)(span > 1 ? span : 1);
        /* transformers: max(0.0, 0.5 * (1.0 + math.cos(math.pi * 1.0 * progress))) */
        f = 0.5 * (1.0 + cos(M_PI * progress));
        if (f < 0.0) f = 0.0;
    }
    return s->base_lr * f;
}

const char *schedule_kind_name(SchedKind k) { return k == SCHED_COSINE ? "cosine" : "constant"; }

int schedule_kind_parse(const char *name, SchedKind *out)
{
    if (!strcmp(name, "constant"))
        *out = SCHED_CONSTANT;
    else if (!strcmp(name, "cosine"))
        *out = SCHED_COSINE;
    else
        return -1;
    return 0;
}
