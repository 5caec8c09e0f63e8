/* procstat.h — what the kernel says about a process: its state letter
 * (R running, S sleeping, D disk wait, T stopped, t traced, Z zombie) and the
 * kernel function it sleeps in (wchan). For the hang view. Linux /proc only;
 * pure reads, any thread.
 */
#ifndef DDPTOP_PROCSTAT_H
#define DDPTOP_PROCSTAT_H

#include <stddef.h>
#include <sys/types.h>

typedef struct {
    char state;     /* 0 when the process is gone or unreadable */
    char wchan[48]; /* "" when unknown or running */
} ProcStat;

/* Fill *out for pid. Returns 0, or -1 when the process does not exist. */
int procstat_read(pid_t pid, ProcStat *out);
/* Whether process pid has a handler for signal sig (/proc/PID/status's
 * SigCgt): 1 yes, 0 no (the signal would do its default: end it, for
 * SIGUSR1), -1 unreadable (gone). */
int procstat_catches(pid_t pid, int sig);

#endif
