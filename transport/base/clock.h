/* clock.h — the frontend's monotonic clock and its stop signals, shared by
 * the loops of run, agent, attach and replay (and the benchmark hooks).
 * Header-only: a clock_gettime and a sigaction each.
 */
#ifndef DDPTOP_CLOCK_H
#define DDPTOP_CLOCK_H

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static inline int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int64_t mono_ms(void) { return mono_ns() / 1000000; }

/* SIGINT, SIGTERM and SIGHUP call handler, without SA_RESTART (zmq_poll
 * and sleeps return EINTR, so the loop sees them at once); SIGPIPE is
 * ignored when ignore_pipe. */
static inline void catch_stop_signals(void (*handler)(int), int ignore_pipe)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (ignore_pipe) signal(SIGPIPE, SIG_IGN);
}

#endif
