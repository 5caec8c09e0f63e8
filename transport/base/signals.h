/* signals.h — the frontend loops' stop signals (run, agent, attach, replay):
 * one set-up and one counter, so Ctrl-C means the same everywhere. The
 * handler only counts; the loop reads the count and acts (never draw or
 * format in a handler). Main thread.
 */
#ifndef DDPTOP_SIGNALS_H
#define DDPTOP_SIGNALS_H

#include <signal.h>

/* Count SIGINT, SIGTERM and SIGHUP, without SA_RESTART (zmq_poll and sleeps
 * return EINTR, so the loop sees them at once); ignore SIGPIPE when
 * ignore_pipe. */
void signals_catch_stop(int ignore_pipe);
/* Stop signals received since signals_catch_stop. */
int signals_stop_count(void);
/* The first stop signal received (SIGINT, SIGTERM, SIGHUP), 0 for none:
 * a run it interrupted exits 128 + that number, as shells report it. */
int signals_first(void);
/* How a user names it: "Ctrl-C" for SIGINT, "SIGTERM", "SIGHUP". */
const char *signals_name(int sig);
/* The counter itself, for loops that take a pointer to it. */
volatile sig_atomic_t *signals_stop_counter(void);

#endif
