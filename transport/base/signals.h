/* signals.h — the frontend loops' stop signals (run, agent, attach, replay):
 * one set-up, so Ctrl-C means the same everywhere. Header-only. Never draw
 * or format in the handler: it only counts, the loop acts.
 */
#ifndef DDPTOP_SIGNALS_H
#define DDPTOP_SIGNALS_H

#include <signal.h>
#include <string.h>

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
