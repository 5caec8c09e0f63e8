/* signals.c — see signals.h. */
#include "base/signals.h"

#include <string.h>

static volatile sig_atomic_t g_stops, g_first;

static void on_stop(int sig)
{
    if (!g_first) g_first = sig;
    g_stops++;
}

void signals_catch_stop(int ignore_pipe)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (ignore_pipe) signal(SIGPIPE, SIG_IGN);
}

int signals_stop_count(void) { return (int)g_stops; }

int signals_first(void) { return (int)g_first; }

const char *signals_name(int sig)
{
    switch (sig) {
    case SIGINT: return "Ctrl-C";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    }
    return "a signal";
}

volatile sig_atomic_t *signals_stop_counter(void) { return &g_stops; }
