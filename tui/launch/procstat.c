/* procstat.c — /proc/PID/stat and /proc/PID/wchan. See procstat.h. */
#include "launch/procstat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int procstat_read(pid_t pid, ProcStat *out)
{
    memset(out, 0, sizeof *out);
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    /* "pid (comm) S ...": comm may hold spaces and parentheses, so the state
     * is after the LAST ')'. */
    char *rp = strrchr(buf, ')');
    if (!rp || rp[1] != ' ' || !rp[2]) return -1;
    out->state = rp[2];
    snprintf(path, sizeof path, "/proc/%d/wchan", (int)pid);
    f = fopen(path, "r");
    if (f) {
        n = fread(out->wchan, 1, sizeof out->wchan - 1, f);
        fclose(f);
        out->wchan[n] = 0;
        out->wchan[strcspn(out->wchan, "\n")] = 0;
        if (!strcmp(out->wchan, "0")) out->wchan[0] = 0;
    }
    return 0;
}

int procstat_catches(pid_t pid, int sig)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int catches = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "SigCgt:", 7)) {
            unsigned long long mask = strtoull(line + 7, NULL, 16);
            catches = sig >= 1 && sig <= 64 && (mask >> (sig - 1) & 1);
            break;
        }
    fclose(f);
    return catches;
}
