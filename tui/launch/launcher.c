/* launcher.c — the workers' processes. See launcher.h. */
#include "launch/launcher.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/err.h"
#include "wire/fault.h"

typedef struct {
    pid_t pid;
    bool running;
    char log[512];
} Proc;

struct Launcher {
    int world;
    Proc *p;
};

static void setenv_int(const char *k, int v)
{
    char b[32];
    snprintf(b, sizeof b, "%d", v);
    setenv(k, b, 1);
}

/* In the child, between fork and exec: only async-signal-safe work plus
 * setenv (we are single-threaded here: ddptop forks before starting threads). */
static void child(const LaunchConfig *c, int local, const char *log, pid_t parent)
{
    /* Die with ddptop, even on its SIGKILL. The check closes the race where
     * ddptop died before prctl ran. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    /* Own process group: Ctrl-C in the terminal goes to ddptop, which then
     * takes the clean path instead of every rank dying at a different step. */
    setpgid(0, 0);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int nul = open("/dev/null", O_RDONLY);
    if (nul >= 0) {
        dup2(nul, 0);
        close(nul);
    }
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }

    /* torchrun's environment, so init_process_group("env://") works as under torchrun */
    char run_id[96];
    launcher_run_id(c->job_id, run_id, sizeof run_id);
    setenv_int("RANK", c->rank_offset + local);
    setenv_int("LOCAL_RANK", local);
    setenv_int("WORLD_SIZE", c->global_world);
    setenv_int("LOCAL_WORLD_SIZE", c->world);
    setenv_int("GROUP_RANK", c->node_rank);
    setenv_int("GROUP_WORLD_SIZE", c->nnodes > 0 ? c->nnodes : 1);
    setenv("ROLE_NAME", "default", 1);
    setenv_int("ROLE_RANK", c->rank_offset + local);
    setenv_int("ROLE_WORLD_SIZE", c->global_world);
    setenv("MASTER_ADDR", c->master_addr, 1);
    setenv_int("MASTER_PORT", c->master_port);
    setenv_int("TORCHELASTIC_RESTART_COUNT", c->restart);
    setenv_int("TORCHELASTIC_MAX_RESTARTS", c->max_restarts);
    setenv("TORCHELASTIC_RUN_ID", run_id, 1);
    /* the port above is free (or node 0's): the adapter need not pick another */
    setenv("DDPTOP_PY_KEEP_PORT", "1", 1);
    if (c->pythonpath) {
        const char *old = getenv("PYTHONPATH");
        char *pp = malloc(strlen(c->pythonpath) + (old ? strlen(old) : 0) + 2);
        if (!pp) _exit(127);
        sprintf(pp, "%s%s%s", c->pythonpath, old && *old ? ":" : "", old && *old ? old : "");
        setenv("PYTHONPATH", pp, 1);
        free(pp);
    }
    if (c->set_faults_spent) {
        char v[24];
        snprintf(v, sizeof v, "%lld", (long long)c->faults_spent);
        setenv(FAULT_SPENT_ENV, v, 1);
    } else {
        unsetenv(FAULT_SPENT_ENV);
    }
    setenv("DDPTOP_CTL", c->ctl_ep, 1);
    setenv("DDPTOP_TEL", c->tel_ep, 1);
    setenv("DDPTOP_JOB", c->job_id, 1);
    if (c->keys_path)
        setenv("DDPTOP_KEYS", c->keys_path, 1);
    else
        unsetenv("DDPTOP_KEYS");
    setenv("DDPTOP_DEVICE", c->device ? c->device : "auto", 1);
    setenv("DDPTOP_BACKEND", c->backend ? c->backend : "auto", 1);
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    setenv("OMP_NUM_THREADS", "1", 1);

    char **argv = calloc((size_t)c->n_worker_args + 2, sizeof *argv);
    if (!argv) _exit(127);
    argv[0] = (char *)c->worker_path;
    for (int i = 0; i < c->n_worker_args; i++) argv[i + 1] = c->worker_args[i];
    execv(c->worker_path, argv);
    fprintf(stderr, "ddptop: cannot exec %s: %s\n", c->worker_path, strerror(errno));
    _exit(127);
}

int launcher_free_port(const char *addr, int *port, char *err, size_t errlen)
{
    int want = *port;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)want) };
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    /* as TCPStore binds: a port left in TIME_WAIT by the last run is free */
    if (fd >= 0 && want) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    socklen_t len = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) || getsockname(fd, (struct sockaddr *)&sa, &len)) {
        if (want)
            err_set(err, errlen, "--master-port %d: not free on %s: %s", want, addr, strerror(errno));
        else
            err_set(err, errlen, "no free port for MASTER_PORT on %s: %s", addr, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    *port = ntohs(sa.sin_port);
    return 0;
}

void launcher_run_id(const char *job_id, char *out, size_t n)
{
    snprintf(out, n, "%s", job_id ? job_id : "none");
    char *dash = strrchr(out, '-');
    if (dash && dash != out && strchr(out, '-') != dash) *dash = '\0';
}

int launcher_start(Launcher **out, const LaunchConfig *c, char *err, size_t errlen)
{
    if (access(c->worker_path, X_OK)) return err_set(err, errlen, "cannot run %s: %s", c->worker_path, strerror(errno));
    Launcher *l = calloc(1, sizeof *l);
    if (!l || !(l->p = calloc((size_t)c->world, sizeof *l->p))) {
        free(l);
        return err_set(err, errlen, "out of memory");
    }
    l->world = c->world;
    pid_t parent = getpid();
    for (int r = 0; r < c->world; r++) {
        Proc *p = &l->p[r];
        if (c->restart > 0)
            snprintf(p->log, sizeof p->log, "%s/rank-%d.restart-%d.log", c->log_dir, c->rank_offset + r, c->restart);
        else
            snprintf(p->log, sizeof p->log, "%s/rank-%d.log", c->log_dir, c->rank_offset + r);
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            err_set(err, errlen, "fork for rank %d: %s", r, strerror(errno)); /* before free changes errno */
            launcher_free(&l);
            return -1;
        }
        if (pid == 0) child(c, r, p->log, parent);
        setpgid(pid, pid); /* also from the parent: no race with signals */
        p->pid = pid;
        p->running = true;
    }
    *out = l;
    return 0;
}

int launcher_log_tail(const Launcher *l, int local, char lines[][256], int max)
{
    FILE *f = max > 0 ? fopen(launcher_log_path(l, local), "r") : NULL;
    if (!f) return 0;
    char ring[8][256], line[256];
    if (max > 8) max = 8;
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (*line) snprintf(ring[n++ % max], sizeof ring[0], "%s", line);
    }
    fclose(f);
    int first = n > max ? n - max : 0;
    for (int i = first; i < n; i++) snprintf(lines[i - first], 256, "%s", ring[i % max]);
    return n - first;
}

int launcher_resume_args(char *const *args, int n, const char *resume, char **out)
{
    int m = 0;
    for (int k = 0; k < n; k++) {
        if ((!strcmp(args[k], "--init-from") || !strcmp(args[k], "--resume")) && k + 1 < n) {
            k++;
            continue;
        }
        out[m++] = args[k];
    }
    out[m++] = "--resume";
    out[m++] = (char *)resume;
    return m;
}

/* A rank that dies between creating its shared-memory segment for the
 * all-reduce and the other ranks' opening it (workers/comm/shm_reduce.c names it
 * "/ddptop-<creator's pid>-<random>", and removes the name once all have it
 * mapped) leaves the name in /dev/shm. Once that process is reaped its pid's
 * names are nobody's: they go. */
static void remove_shm_of(pid_t pid)
{
    char prefix[32];
    int n = snprintf(prefix, sizeof prefix, "ddptop-%d-", (int)pid);
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, prefix, (size_t)n)) unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
}

/* sig to the rank and what it started in its process group (each rank
 * leads one: DataLoader workers, a script's own subprocesses), as torchrun
 * signals its workers' groups; the rank alone if it left its group. */
static int signal_rank(const Proc *p, int sig)
{
    if (kill(-p->pid, sig) == 0) return 0;
    return kill(p->pid, sig);
}

int launcher_reap(Launcher *l, void (*cb)(void *ctx, int rank, int pid, int status), void *ctx)
{
    int running = 0;
    if (!l) return 0;
    for (int r = 0; r < l->world; r++) {
        Proc *p = &l->p[r];
        if (!p->running) continue;
        /* seen exited, not yet reaped: while its zombie holds the pid (and
         * so its group's id) what the rank left running in its group (a
         * script's subprocess, a stuck forked child) goes with it, and no one
         * else can have that group id; then it is reaped */
        siginfo_t si;
        memset(&si, 0, sizeof si);
        int w = waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT);
        if (w == 0 && si.si_pid == p->pid) {
            kill(-p->pid, SIGKILL);
            int st = 0;
            while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR) {}
            p->running = false;
            remove_shm_of(p->pid);
            if (cb) cb(ctx, r, (int)p->pid, st);
        } else if (w < 0 && errno == ECHILD) {
            p->running = false;
            if (cb) cb(ctx, r, (int)p->pid, 0xff00); /* vanished: report as exit 255 */
        } else {
            running++;
        }
    }
    return running;
}

int launcher_signal_all(Launcher *l, int sig)
{
    int n = 0;
    if (!l) return 0;
    for (int r = 0; r < l->world; r++)
        if (l->p[r].running && signal_rank(&l->p[r], sig) == 0) n++;
    return n;
}

int launcher_running(const Launcher *l)
{
    int n = 0;
    if (!l) return 0;
    for (int r = 0; r < l->world; r++) n += l->p[r].running;
    return n;
}

pid_t launcher_pid(const Launcher *l, int rank) { return (l && rank >= 0 && rank < l->world) ? l->p[rank].pid : -1; }

const char *launcher_log_path(const Launcher *l, int rank)
{
    return (l && rank >= 0 && rank < l->world) ? l->p[rank].log : "";
}

void launcher_free(Launcher **pl)
{
    Launcher *l = pl ? *pl : NULL;
    if (!l) return;
    for (int r = 0; r < l->world; r++) {
        Proc *p = &l->p[r];
        if (!p->running || p->pid <= 0) continue;
        signal_rank(p, SIGKILL);
        while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR) {}
        remove_shm_of(p->pid);
        p->running = false;
    }
    free(l->p);
    free(l);
    *pl = NULL;
}
