/* clock.h — the one clock of every tree: monotonic time for intervals and
 * deadlines, wall-clock time for what crosses machines (the wire's "t").
 * Header-only: a clock_gettime each; any thread. The job model never calls
 * these: its callers pass the time in.
 */
#ifndef DDPTOP_CLOCK_H
#define DDPTOP_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t clock_read_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* CLOCK_MONOTONIC in ns, ms and fractional ms. */
static inline int64_t mono_ns(void) { return clock_read_ns(CLOCK_MONOTONIC); }
static inline int64_t mono_ms(void) { return mono_ns() / 1000000; }
static inline double mono_ms_f(void) { return (double)mono_ns() / 1e6; }
/* CLOCK_REALTIME in ns. */
static inline int64_t wall_ns(void) { return clock_read_ns(CLOCK_REALTIME); }

#endif
