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
#include <stddef.h>
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
    bool help;         /* -h: print the help, exit 0 */
    int first_trainer; /* argv index of the first trainer option */
} RunParse;

/* The embedded default job: long enough to watch and steer. */
static char *default_trainer_args[] = { "--epochs", "30" };

static RunOptions run_defaults(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return (RunOptions){ .nproc = cores >= 2 || cores < 1 ? 2 : 1,
                         .timeout_s = 300,
                         .stop_grace_s = 30,
                         .hang_after_s = 10,
                         .device = "auto",
                         .backend = "auto",
                         .nnodes = 1,
                         .node_rank = 0,
                         .rdzv_timeout_s = 60 };
}

/* run's options as data: what each takes and where it goes. */
typedef enum {
    OPT_FLAG,   /* sets a bool */
    OPT_NUM,    /* a number in [lo, hi] */
    OPT_INT,    /* a whole number in [lo, hi] */
    OPT_STR,    /* a non-empty string */
    OPT_PATH,   /* a string, empty allowed (--log-dir "") */
    OPT_CHOICE, /* one of `words` */
} OptKind;

typedef struct {
    const char *name, *alias;
    OptKind kind;
    size_t off; /* the field in RunOptions */
    double lo, hi;
    const char *msg; /* the error: OPT_INT its name, OPT_STR missing, OPT_CHOICE unknown */
    const char *const *words;
} RunOpt;

#define AT(f) offsetof(RunOptions, f)
static const char *const backends[] = { "gloo", "nccl", "auto", NULL };
static const char *const devices[] = { "cpu", "cuda", "auto", NULL };
// clang-format off
static const RunOpt run_opts[] = {
    {"-n", "--nproc-per-node", OPT_INT, AT(nproc), 1, 256, "-n", NULL},
    {"--headless", NULL, OPT_FLAG, AT(headless), 0, 0, NULL, NULL},
    {"--json", NULL, OPT_FLAG, AT(json), 0, 0, NULL, NULL},
    {"--timeout", NULL, OPT_NUM, AT(timeout_s), 0.1, 86400, NULL, NULL},
    {"--hang-after", NULL, OPT_NUM, AT(hang_after_s), 0.5, 86400, NULL, NULL},
    {"--stop-grace", NULL, OPT_NUM, AT(stop_grace_s), 0, 86400, NULL, NULL},
    {"--max-restarts", NULL, OPT_INT, AT(max_restarts), 0, 1000, "--max-restarts", NULL},
    {"--log-dir", NULL, OPT_PATH, AT(log_dir), 0, 0, "%s: missing value", NULL},
    {"--record", NULL, OPT_STR, AT(record_path), 0, 0, "%s: missing value", NULL},
    {"--publish", NULL, OPT_STR, AT(publish_ep), 0, 0, "%s: missing value", NULL},
    {"--nnodes", NULL, OPT_INT, AT(nnodes), 1, 4096, "--nnodes", NULL},
    {"--node-rank", NULL, OPT_INT, AT(node_rank), 0, 4095, "--node-rank", NULL},
    {"--rdzv", "--rdzv-endpoint", OPT_STR, AT(rdzv), 0, 0, "%s: missing value (HOST:PORT)", NULL},
    {"--rdzv-timeout", NULL, OPT_NUM, AT(rdzv_timeout_s), 1, 86400, NULL, NULL},
    {"--keys", NULL, OPT_STR, AT(keys_path), 0, 0, "%s: missing value", NULL},
    {"--backend", NULL, OPT_CHOICE, AT(backend), 0, 0, "--backend: unknown backend \"%s\" (gloo, nccl, auto)",
     backends},
    {"--device", NULL, OPT_CHOICE, AT(device), 0, 0, "--device: unknown device \"%s\" (cpu, cuda, auto)", devices},
};
// clang-format on
#undef AT

static const RunOpt *find_opt(const char *a)
{
    for (size_t k = 0; k < sizeof run_opts / sizeof run_opts[0]; k++)
        if (!strcmp(a, run_opts[k].name) || (run_opts[k].alias && !strcmp(a, run_opts[k].alias))) return &run_opts[k];
    return NULL;
}

/* Option d (as typed: a) with value v into o. Returns 0 or 2 (said why). */
static int set_opt(const RunOpt *d, const char *a, const char *v, RunOptions *o)
{
    void *field = (char *)o + d->off;
    switch (d->kind) {
    case OPT_FLAG: *(bool *)field = true; return 0;
    case OPT_NUM: return cmd_parse_num(a, v, d->lo, d->hi, (double *)field);
    case OPT_INT: return cmd_parse_int(a, d->msg, v, (int)d->lo, (int)d->hi, (int *)field);
    case OPT_STR:
    case OPT_PATH:
        if (!v || (d->kind == OPT_STR && !*v)) return cmd_usage_error(d->msg, a);
        *(const char **)field = v;
        return 0;
    case OPT_CHOICE:
        if (!v) return cmd_usage_error("%s: missing value", a);
        for (int k = 0; d->words[k]; k++)
            if (!strcmp(v, d->words[k])) {
                *(const char **)field = v;
                return 0;
            }
        return cmd_usage_error(d->msg, v);
    }
    return 0;
}

/* The options up to "--" (an argument that is no option of ours is an
 * error). Returns 0 or 2 (said why). */
static int parse_run_args(int argc, char **argv, RunOptions *o, RunParse *p)
{
    int i = 0;
    for (; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            p->help = true;
            return 0;
        }
        const RunOpt *d = find_opt(a);
        if (!d) return cmd_usage_error("unknown option \"%s\"", a);
        if (set_opt(d, a, v, o)) return 2;
        p->nproc_set |= d->off == offsetof(RunOptions, nproc);
        p->node_rank_set |= d->off == offsetof(RunOptions, node_rank);
        if (d->kind != OPT_FLAG) i++;
    }
    p->first_trainer = i;
    return 0;
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
        fprintf(stderr,
                "ddptop: --node-rank %d needs the job's key file: --keys FILE (node 0 wrote it; copy it here, "
                "mode 0600)\n",
                o->node_rank);
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
    if (env && *env) {
        snprintf(out, n, "%s", env);
        return;
    }
    char self[PATH_MAX - 32];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k <= 0) {
        snprintf(out, n, "ddptop-worker");
        return;
    }
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
static void exec_check(const char *wpath, char *const *args, int n, int world, const char *device, const char *backend,
                       int pfd[2])
{
    dup2(pfd[1], 2);
    dup2(pfd[1], 1); /* on success the worker says "gpus N" */
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
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        return 0;
    }
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
    const char *check_bin =
        have_cpu && (!strcmp(o->device, "cpu") || (!strcmp(o->device, "auto") && !maybe_gpu)) ? cpath : wpath;
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
    RunParse p = { 0 };
    o.listen_ep = listen_ep;
    int rc = parse_run_args(argc, argv, &o, &p);
    if (rc) return rc;
    if (p.help) {
        cmd_print_help(stdout);
        return 0;
    }
    if ((rc = check_run_options(&o, &p))) return rc;
    o.description = describe(argc, argv);

    char tbuf[32];
    int n = 0;
    char **args = trainer_args(argc - p.first_trainer, argv + p.first_trainer, o.timeout_s, tbuf, sizeof tbuf, &n);
    if (!args) {
        fprintf(stderr, "ddptop: out of memory\n");
        return 1;
    }
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

int cmd_run(int argc, char **argv) { return run_main(argc, argv, NULL); }

/* listen ENDPOINT [run options]: the endpoint first. (`listen --help` is
 * an endpoint missing today, exit 2.) */
int cmd_listen(int argc, char **argv)
{
    if (argc < 1 || argv[0][0] == '-')
        return cmd_usage_error("%s: missing ENDPOINT (tcp://HOST:PORT or ipc://PATH)", "listen");
    return run_main(argc - 1, argv + 1, argv[0]);
}
