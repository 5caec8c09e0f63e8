/* run.c — `ddptop run` (also what `ddptop` with no subcommand does) and
 * `ddptop listen ENDPOINT`: the options into a RunOptions, the checks that
 * make a bad command line one line before anything starts, the choice of
 * worker binary, and the hand-over to the run loop (tui/run/) or, on node
 * K > 0, to the node agent (tui/cluster/).
 *
 * Does not own the job: run_job and agent_run do. Main thread.
 */
#include "cmd/cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster/agent.h"
#include "net/publish.h"
#include "record/record.h"
#include "run/run.h"

/* What the parse saw beyond RunOptions. */
typedef struct {
    bool node_rank_set, nproc_set;
    bool help;                   /* -h: print the help, exit 0 */
    int first_trainer;           /* argv index of the first trainer option */
} RunParse;

/* The embedded default job: long enough to watch and steer. */
static char *default_trainer_args[] = {"--epochs", "30"};

static RunOptions run_defaults(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return (RunOptions){.nproc = cores >= 2 || cores < 1 ? 2 : 1, .timeout_s = 300, .stop_grace_s = 30,
                        .hang_after_s = 10, .device = "auto", .backend = "auto", .nnodes = 1, .node_rank = 0,
                        .rdzv_timeout_s = 60};
}

/* A string value: missing (or empty, unless may_be_empty) is a usage error. */
static int opt_str(const char *a, const char *v, bool may_be_empty, const char *what, const char **out)
{
    if (!v || (!may_be_empty && !*v)) return cmd_usage_error(what, a);
    *out = v;
    return 0;
}

/* One of a few words ("gloo", "nccl", "auto"); msg names them. */
static int opt_choice(const char *a, const char *v, const char *const *words, const char *msg, const char **out)
{
    if (!v) return cmd_usage_error("%s: missing value", a);
    for (int k = 0; words[k]; k++)
        if (!strcmp(v, words[k])) {
            *out = v;
            return 0;
        }
    return cmd_usage_error(msg, v);
}

/* The options up to "--" (or the first argument that is not ours: none
 * is, that is an error). Returns 0 or 2 (said why). */
static int parse_run_args(int argc, char **argv, RunOptions *o, RunParse *p)
{
    static const char *const backends[] = {"gloo", "nccl", "auto", NULL};
    static const char *const devices[] = {"cpu", "cuda", "auto", NULL};
    int i = 0, rc = 0;
    for (; i < argc && !rc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = true;       /* the option takes the next argument */
        if (!strcmp(a, "--")) { i++; break; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { p->help = true; return 0; }
        if (!strcmp(a, "-n") || !strcmp(a, "--nproc-per-node")) {
            rc = cmd_parse_int(a, "-n", v, 1, 256, &o->nproc);
            p->nproc_set = true;
        } else if (!strcmp(a, "--headless")) {
            o->headless = true;
            takes = false;
        } else if (!strcmp(a, "--json")) {
            o->json = true;
            takes = false;
        } else if (!strcmp(a, "--timeout")) {
            rc = cmd_parse_num(a, v, 0.1, 86400, &o->timeout_s);
        } else if (!strcmp(a, "--hang-after")) {
            rc = cmd_parse_num(a, v, 0.5, 86400, &o->hang_after_s);
        } else if (!strcmp(a, "--stop-grace")) {
            rc = cmd_parse_num(a, v, 0, 86400, &o->stop_grace_s);
        } else if (!strcmp(a, "--max-restarts")) {
            rc = cmd_parse_int(a, a, v, 0, 1000, &o->max_restarts);
        } else if (!strcmp(a, "--log-dir")) {
            rc = opt_str(a, v, true, "%s: missing value", &o->log_dir);
        } else if (!strcmp(a, "--record")) {
            rc = opt_str(a, v, false, "%s: missing value", &o->record_path);
        } else if (!strcmp(a, "--publish")) {
            rc = opt_str(a, v, false, "%s: missing value", &o->publish_ep);
        } else if (!strcmp(a, "--nnodes")) {
            rc = cmd_parse_int(a, a, v, 1, 4096, &o->nnodes);
        } else if (!strcmp(a, "--node-rank")) {
            rc = cmd_parse_int(a, a, v, 0, 4095, &o->node_rank);
            p->node_rank_set = true;
        } else if (!strcmp(a, "--rdzv") || !strcmp(a, "--rdzv-endpoint")) {
            rc = opt_str(a, v, false, "%s: missing value (HOST:PORT)", &o->rdzv);
        } else if (!strcmp(a, "--rdzv-timeout")) {
            rc = cmd_parse_num(a, v, 1, 86400, &o->rdzv_timeout_s);
        } else if (!strcmp(a, "--keys")) {
            rc = opt_str(a, v, false, "%s: missing value", &o->keys_path);
        } else if (!strcmp(a, "--backend")) {
            rc = opt_choice(a, v, backends, "--backend: unknown backend \"%s\" (gloo, nccl, auto)", &o->backend);
        } else if (!strcmp(a, "--device")) {
            rc = opt_choice(a, v, devices, "--device: unknown device \"%s\" (cpu, cuda, auto)", &o->device);
        } else {
            return cmd_usage_error("unknown option \"%s\"", a);
        }
        if (takes) i++;
    }
    p->first_trainer = i;
    return rc;
}

/* The options that only make sense together, and the files they name.
 * Returns 0 or 2 (said why). */
static int check_run_options(const RunOptions *o, const RunParse *p)
{
    if (o->json && !o->headless) return cmd_usage_error("%s needs --headless", "--json");
    if (o->publish_ep) {
        char perr[300];
        if (publisher_check_endpoint_keys(o->publish_ep, o->keys_path != NULL, perr, sizeof perr)) {
            fprintf(stderr, "ddptop: %s\n", perr);
            return 2;
        }
    }
    if (o->nnodes > 1 && !o->rdzv) return cmd_usage_error("%s needs --rdzv HOST:PORT (node 0's address)", "--nnodes");
    if (o->nnodes == 1 && (o->rdzv || p->node_rank_set))
        return cmd_usage_error("%s is for several nodes: add --nnodes M", o->rdzv ? "--rdzv" : "--node-rank");
    if (o->node_rank >= o->nnodes) {
        fprintf(stderr, "ddptop: --node-rank %d: expected 0..%d for --nnodes %d\n", o->node_rank, o->nnodes - 1,
                o->nnodes);
        return 2;
    }
    if (o->listen_ep && o->nnodes > 1)
        return cmd_usage_error("%s: workers started elsewhere connect to it; drop --nnodes", "listen");
    if (o->rdzv && strrchr(o->rdzv, ':') == NULL) return cmd_usage_error("--rdzv %s: expected HOST:PORT", o->rdzv);
    if (o->node_rank > 0 && !o->keys_path) {
        fprintf(stderr, "ddptop: --node-rank %d needs the job's key file: --keys FILE (node 0 wrote it; copy it here, "
                        "mode 0600)\n", o->node_rank);
        return 2;
    }
    if (!strcmp(o->backend, "nccl") && !strcmp(o->device, "cpu"))
        return cmd_usage_error("%s: NCCL reduces GPU memory; use --backend gloo with --device cpu",
                               "--backend nccl --device cpu");
    if (o->log_dir) {
        struct stat st;
        if (stat(o->log_dir, &st) && mkdir(o->log_dir, 0755)) {
            fprintf(stderr, "ddptop: --log-dir %s: %s\n", o->log_dir, strerror(errno));
            return 2;
        }
    }
    /* A bad --record path is a usage error, found before anything runs;
     * an existing file is never overwritten (it may be someone's only copy). */
    if (o->record_path) {
        int fd = open(o->record_path, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0) {
            fprintf(stderr, "ddptop: --record %s: %s\n", o->record_path,
                    errno == EEXIST ? "file exists (choose a new name)" : strerror(errno));
            return 2;
        }
        close(fd);
        unlink(o->record_path);
    }
    return 0;
}

/* "ddptop run ARGS...", for a recording's header. */
static const char *describe(int argc, char **argv)
{
    static char desc[REC_DESC_MAX];
    size_t dl = (size_t)snprintf(desc, sizeof desc, "ddptop run");
    for (int k = 0; k < argc && dl < sizeof desc; k++)
        dl += (size_t)snprintf(desc + dl, sizeof desc - dl, " %s", argv[k]);
    return desc;
}

/* The workers' arguments: --timeout (ddptop's to set for every rank), then
 * the trainer's (the default job when none). NULL when out of memory; the
 * caller frees the array, not the strings (tbuf holds the timeout). */
static char **trainer_args(int argc, char **argv, double timeout_s, char *tbuf, size_t tlen, int *n_out)
{
    char *const *targs = argv;
    int ntargs = argc;
    if (ntargs == 0) {
        targs = default_trainer_args;
        ntargs = 2;
    }
    char **args = calloc((size_t)ntargs + 3, sizeof *args);
    if (!args) return NULL;
    snprintf(tbuf, tlen, "%g", timeout_s);
    int n = 0;
    args[n++] = "--timeout";
    args[n++] = tbuf;
    for (int k = 0; k < ntargs; k++) args[n++] = targs[k];
    *n_out = n;
    return args;
}

/* ddptop-worker lives next to ddptop. DDPTOP_WORKER names another program
 * speaking the protocol (tests run a scripted feeder in its place; see
 * docs/TUI.md, "For developers"). */
static void worker_path(char *out, size_t n)
{
    const char *env = getenv("DDPTOP_WORKER");
    if (env && *env) { snprintf(out, n, "%s", env); return; }
    char self[PATH_MAX - 32];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k <= 0) { snprintf(out, n, "ddptop-worker"); return; }
    self[k] = 0;
    char *slash = strrchr(self, '/');
    if (slash) *slash = 0;
    snprintf(out, n, "%s/ddptop-worker", self);
}

/* cpu/ddptop-worker beside ddptop-worker (a CUDA build): the same worker
 * without the CUDA libraries, which cost every start 0.1 s of dynamic
 * loading. Fills cpath; true when it is there to use (not when
 * DDPTOP_WORKER names the worker). */
static bool cpu_worker_path(const char *wpath, char *cpath, size_t n)
{
    snprintf(cpath, n, "%s", wpath);
    char *slash = strrchr(cpath, '/');
    snprintf(slash ? slash + 1 : cpath, n - (size_t)(slash ? slash + 1 - cpath : 0), "cpu/ddptop-worker");
    return !getenv("DDPTOP_WORKER") && access(cpath, X_OK) == 0;
}

/* The worker's answer to a check: on success "gpus N" and "device D". */
static void read_check_answer(const char *msg, int *gpus, char *resolved, size_t rlen)
{
    const char *g = strstr(msg, "gpus "), *dv = strstr(msg, "device ");
    if (gpus && g) *gpus = atoi(g + 5);
    if (resolved && rlen && dv) snprintf(resolved, rlen, "%.*s", (int)strcspn(dv + 7, " \n"), dv + 7);
}

/* The child of check_trainer_args: the worker in its check mode, its
 * stdout and stderr into the pipe. Never returns. */
static void exec_check(const char *wpath, char *const *args, int n, int world, const char *device,
                       const char *backend, int pfd[2])
{
    dup2(pfd[1], 2);
    dup2(pfd[1], 1);             /* on success the worker says "gpus N" */
    close(pfd[0]);
    close(pfd[1]);
    char **argv = calloc((size_t)n + 2, sizeof *argv);
    if (!argv) _exit(1);
    argv[0] = (char *)wpath;
    for (int i = 0; i < n; i++) argv[i + 1] = args[i];
    setenv("DDPTOP_CHECK_ARGS", "1", 1);
    setenv("DDPTOP_DEVICE", device, 1);
    setenv("DDPTOP_BACKEND", backend, 1);
    /* so --resume can compare the checkpoint's world size with -n */
    char w[16];
    snprintf(w, sizeof w, "%d", world);
    setenv("WORLD_SIZE", w, 1);
    execv(wpath, argv);
    fprintf(stderr, "cannot run %s: %s\n", wpath, strerror(errno));
    _exit(127);
}

/* Ask the worker to validate the trainer options and the device (no usable
 * GPU for --device cuda, no NCCL), so a typo is one line before anything
 * is launched. Returns 0 when valid (also when the check cannot run: the
 * launch will say), else 2 (printed). */
static int check_trainer_args(const char *wpath, char *const *args, int n, int world, const char *device,
                              const char *backend, int *gpus, char *resolved, size_t rlen)
{
    if (gpus) *gpus = 0;
    if (resolved && rlen) snprintf(resolved, rlen, "%s", device);
    int pfd[2];
    if (pipe(pfd)) return 0;
    pid_t pid = fork();
    if (pid < 0) { close(pfd[0]); close(pfd[1]); return 0; }
    if (pid == 0) exec_check(wpath, args, n, world, device, backend, pfd);
    close(pfd[1]);
    char msg[1024] = "";
    size_t got = 0;
    ssize_t k;
    while (got < sizeof msg - 1 && (k = read(pfd[0], msg + got, sizeof msg - 1 - got)) > 0) got += (size_t)k;
    msg[got] = 0;
    close(pfd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        read_check_answer(msg, gpus, resolved, rlen);
        return 0;
    }
    msg[strcspn(msg, "\n")] = 0;
    const char *p = strncmp(msg, "ddptop-worker: ", 15) ? msg : msg + 15;
    fprintf(stderr, "ddptop: %s\n", *p ? p : "the trainer options were refused");
    return 2;
}

/* Which worker binary runs the job, checked with its trainer arguments:
 * o->worker_path set, and o->nproc when -n was not given and the job runs
 * on GPUs (torchrun's --nproc-per-node gpu: one rank per GPU). wpath and
 * cpath hold the paths o->worker_path points at. Returns 0 or 2. */
static int choose_worker(RunOptions *o, const RunParse *p, char **args, int n, char *wpath, size_t wlen, char *cpath,
                         size_t clen)
{
    worker_path(wpath, wlen);
    bool have_cpu = cpu_worker_path(wpath, cpath, clen);
    /* no NVIDIA device nodes, no driver: auto means cpu, no need to ask CUDA */
    bool maybe_gpu = access("/dev/nvidiactl", F_OK) == 0 || access("/proc/driver/nvidia", F_OK) == 0;
    const char *check_bin = have_cpu && (!strcmp(o->device, "cpu") || (!strcmp(o->device, "auto") && !maybe_gpu))
                                ? cpath : wpath;
    o->worker_path = check_bin;
    /* listen starts nothing: the workers bring their own options */
    if (o->listen_ep) return 0;
    int gpus = 0;
    char resolved[32] = "";
    int rc = check_trainer_args(check_bin, args, n, o->nproc * o->nnodes, o->device, o->backend, &gpus, resolved,
                                sizeof resolved);
    if (rc) return rc;
    if (have_cpu && !strcmp(resolved, "cpu")) o->worker_path = cpath;
    /* checked again with the new world: --resume compares the world size */
    if (!p->nproc_set && gpus > 0 && strcmp(o->device, "cpu") && gpus != o->nproc) {
        o->nproc = gpus;
        rc = check_trainer_args(check_bin, args, n, o->nproc * o->nnodes, o->device, o->backend, NULL, NULL, 0);
    }
    return rc;
}

/* run and listen: listen_ep NULL for run. */
static int run_main(int argc, char **argv, const char *listen_ep)
{
    RunOptions o = run_defaults();
    RunParse p = {0};
    o.listen_ep = listen_ep;
    int rc = parse_run_args(argc, argv, &o, &p);
    if (rc) return rc;
    if (p.help) { cmd_print_help(stdout); return 0; }
    if ((rc = check_run_options(&o, &p))) return rc;
    o.description = describe(argc, argv);

    char tbuf[32];
    int n = 0;
    char **args = trainer_args(argc - p.first_trainer, argv + p.first_trainer, o.timeout_s, tbuf, sizeof tbuf, &n);
    if (!args) { fprintf(stderr, "ddptop: out of memory\n"); return 1; }
    char wpath[PATH_MAX], cpath[PATH_MAX + 8];
    rc = choose_worker(&o, &p, args, n, wpath, sizeof wpath, cpath, sizeof cpath);
    if (!rc) {
        o.trainer_args = args;
        o.n_trainer_args = n;
        rc = o.node_rank > 0 ? agent_run(&o) : run_job(&o);
    }
    free(args);
    return rc;
}

int cmd_run(int argc, char **argv)
{
    return run_main(argc, argv, NULL);
}

/* listen ENDPOINT [run options]: the endpoint first. (`listen --help` is
 * an endpoint missing today, exit 2.) */
int cmd_listen(int argc, char **argv)
{
    if (argc < 1 || argv[0][0] == '-')
        return cmd_usage_error("%s: missing ENDPOINT (tcp://HOST:PORT or ipc://PATH)", "listen");
    return run_main(argc - 1, argv + 1, argv[0]);
}
