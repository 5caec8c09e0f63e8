/* fault.c — teaching faults. See fault.h. */
#include "wire/fault.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *fault_name(FaultKind k)
{
    switch (k) {
    case FAULT_KILL: return "kill";
    case FAULT_STALL: return "stall";
    case FAULT_SLOW: return "slow";
    case FAULT_SKIP_SET_EPOCH: return "skip-set-epoch";
    case FAULT_UNSAFE_STOP: return "unsafe-stop";
    case FAULT_NO_BARRIER: return "no-barrier";
    default: return "none";
    }
}

static int num(const char *s, const char *end, int64_t lo, int64_t hi, int64_t *out)
{
    if (s == end) return -1;
    char buf[32];
    size_t n = (size_t)(end - s);
    if (n >= sizeof buf) return -1;
    memcpy(buf, s, n);
    buf[n] = 0;
    char *e;
    errno = 0;
    long long v = strtoll(buf, &e, 10);
    if (errno || *e || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

void fault_add(FaultPlan *p, const Fault *f)
{
    if (p->n < FAULT_MAX) p->f[p->n++] = *f;
}

int fault_parse(FaultPlan *p, const char *spec, char *err, size_t errlen)
{
    Fault f = { .kind = FAULT_NONE, .rank = -1 };
    int64_t r = 0, s = 0, ms = 0;
    const char *colon = strchr(spec, ':'), *at = strchr(spec, '@');
    if (!strncmp(spec, "kill:", 5) || !strncmp(spec, "stall:", 6)) {
        f.kind = spec[0] == 'k' ? FAULT_KILL : FAULT_STALL;
        if (!at || num(colon + 1, at, 0, 1 << 20, &r) || num(at + 1, at + strlen(at), 0, INT64_C(1) << 40, &s))
            goto bad;
        f.rank = (int)r;
        f.step = s;
    } else if (!strncmp(spec, "slow:", 5)) {
        f.kind = FAULT_SLOW;
        const char *c2 = strchr(colon + 1, ':');
        if (!c2 || num(colon + 1, c2, 0, 1 << 20, &r)) goto bad;
        const char *end = c2 + strlen(c2);
        if (end - c2 > 3 && !strcmp(end - 2, "ms")) end -= 2;
        if (num(c2 + 1, end, 1, 600000, &ms)) goto bad;
        f.rank = (int)r;
        f.ms = ms;
    } else if (!strcmp(spec, "skip-set-epoch")) {
        f.kind = FAULT_SKIP_SET_EPOCH;
    } else if (!strncmp(spec, "unsafe-stop", 11) && (spec[11] == 0 || spec[11] == '@')) {
        f.kind = FAULT_UNSAFE_STOP;
        if (spec[11] == '@' && num(spec + 12, spec + strlen(spec), 0, INT64_C(1) << 40, &s)) goto bad;
        f.step = s;
    } else if (!strcmp(spec, "no-barrier")) {
        f.kind = FAULT_NO_BARRIER;
    } else {
        goto bad;
    }
    if (p->n == FAULT_MAX) {
        snprintf(err, errlen, "--fault: at most %d faults", FAULT_MAX);
        return -1;
    }
    fault_add(p, &f);
    return 0;
bad:
    snprintf(
        err, errlen,
        "--fault: cannot read \"%s\" (kill:R@S, stall:R@S, slow:R:MSms, skip-set-epoch, unsafe-stop[@S], no-barrier)",
        spec);
    return -1;
}

/* kind 4 bits | rank 20 bits | value 39 bits (step or ms). */
int64_t fault_pack(const Fault *f)
{
    uint64_t v = (uint64_t)(f->kind == FAULT_SLOW ? f->ms : f->step) & ((UINT64_C(1) << 39) - 1);
    uint64_t r = (uint64_t)(f->rank < 0 ? 0xFFFFF : f->rank) & 0xFFFFF;
    return (int64_t)(((uint64_t)f->kind << 59) | (r << 39) | v);
}

int fault_unpack(int64_t arg, Fault *out)
{
    uint64_t a = (uint64_t)arg;
    int kind = (int)(a >> 59);
    if (kind <= FAULT_NONE || kind > FAULT_NO_BARRIER) return -1;
    uint64_t r = (a >> 39) & 0xFFFFF;
    int64_t v = (int64_t)(a & ((UINT64_C(1) << 39) - 1));
    out->kind = (FaultKind)kind;
    out->rank = r == 0xFFFFF ? -1 : (int)r;
    out->step = kind == FAULT_SLOW ? 0 : v;
    out->ms = kind == FAULT_SLOW ? v : 0;
    return 0;
}

int fault_drop_spent(FaultPlan *p, int64_t spent_step)
{
    int m = 0, dropped = 0;
    for (int i = 0; i < p->n; i++) {
        FaultKind k = p->f[i].kind;
        if ((k == FAULT_KILL || k == FAULT_STALL || k == FAULT_UNSAFE_STOP) && p->f[i].step <= spent_step)
            dropped++;
        else
            p->f[m++] = p->f[i];
    }
    p->n = m;
    return dropped;
}

const Fault *fault_find(const FaultPlan *p, FaultKind kind, int rank)
{
    for (int i = 0; i < p->n; i++)
        if (p->f[i].kind == kind && (p->f[i].rank < 0 || p->f[i].rank == rank)) return &p->f[i];
    return NULL;
}

void fault_explain(const Fault *f, char *buf, size_t len)
{
    switch (f->kind) {
    case FAULT_KILL:
        snprintf(buf, len,
                 "fault: rank %d kills itself at step %" PRId64 " - the others will fail in their next all-reduce, "
                 "and ddptop stops the job (torchrun's rule)",
                 f->rank, f->step);
        break;
    case FAULT_STALL:
        snprintf(buf, len,
                 "fault: rank %d stops stepping at step %" PRId64 " but keeps its sockets - the others wait in "
                 "their next all-reduce until the timeout",
                 f->rank, f->step);
        break;
    case FAULT_SLOW:
        snprintf(buf, len,
                 "fault: rank %d sleeps %" PRId64 " ms every step - a straggler: every other rank waits for it "
                 "in each all-reduce",
                 f->rank, f->ms);
        break;
    case FAULT_SKIP_SET_EPOCH:
        snprintf(buf, len,
                 "fault: set_epoch is skipped - every epoch repeats the first epoch's order (the sampler panel "
                 "shows the repeat)");
        break;
    case FAULT_UNSAFE_STOP:
        if (f->rank >= 0)
            snprintf(buf, len,
                     "fault: unsafe stop - rank %d stops alone at step %" PRId64 " without agreeing, so the others "
                     "wait forever in an all-reduce it never joins",
                     f->rank, f->step);
        else
            snprintf(buf, len,
                     "fault: unsafe stop - each rank stops at its own step without agreeing, so the ranks that "
                     "go on wait forever in an all-reduce the others never join");
        break;
    case FAULT_NO_BARRIER:
        snprintf(buf, len,
                 "fault: no barrier before destroy - a rank may tear down its connections while a peer "
                 "still uses them");
        break;
    default: snprintf(buf, len, "no fault");
    }
}
