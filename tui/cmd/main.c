/* main.c — ddptop: the command line.
 *
 *   ddptop [run] [-n N] [--device D] [--backend B] [--headless [--json]] [--timeout S] [--log-dir DIR]
 *          [--max-restarts K] [-- TRAINER OPTIONS]
 *   ddptop sampler --size N --world W [--epoch E] [--seed S] [--no-shuffle] [--drop-last]
 *   ddptop export FILE [--chrome-trace OUT.json] [--jsonl OUT] [--csv OUT]
 *   ddptop replay FILE [--speed X] [--headless [--json]]
 *   ddptop run ... --nnodes M --node-rank K --rdzv HOST:PORT [--keys FILE] [--rdzv-timeout S]
 *   ddptop listen ENDPOINT [--keys FILE] [--headless [--json]] ...
 *   ddptop attach ENDPOINT [--control] [--keys FILE] [--headless [--json]]
 *
 * Usage errors print one line and exit 2.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attach/client.h"
#include "record/export.h"
#include "net/publish.h"
#include "record/record.h"
#include "record/replay.h"
#include "cluster/agent.h"
#include "run/run.h"
#include "wire/sampler.h"

#define DDPTOP_VERSION "0.1.0"

static const char USAGE[] =
    "usage: ddptop [run] [options] [-- TRAINER OPTIONS]\n"
    "       ddptop sampler --size N --world W [--epoch E] [--seed S] [--no-shuffle] [--drop-last]\n"
    "       ddptop export FILE [--chrome-trace OUT.json] [--jsonl OUT] [--csv OUT]\n"
    "       ddptop replay FILE [--speed X] [--headless [--json]]\n"
    "       ddptop listen ENDPOINT [--keys FILE] [run options]   (workers started elsewhere connect)\n"
    "       ddptop attach ENDPOINT [--control] [--keys FILE] [--wait S] [--headless [--json]]\n"
    "\n"
    "Launch one ddptop-worker per rank, train data-parallel (DDP semantics: NCCL on GPUs,\n"
    "Gloo on CPUs) and watch every rank live. With no arguments: 2 ranks (fewer on a 1-core machine) on\n"
    "Fashion-MNIST when installed, else a synthetic set.\n"
    "\n"
    "run options:\n"
    "  -n, --nproc-per-node N  ranks to launch on this node (default: one per GPU when the job\n"
    "                          runs on GPUs, else 2, or the core count if smaller)\n"
    "  --device cpu|cuda|auto  compute device (default auto: cuda when a GPU is usable, else cpu)\n"
    "  --backend gloo|nccl|auto  collectives (default auto: nccl on cuda, gloo on cpu; gloo on\n"
    "                          cuda stages through host memory: more ranks than GPUs)\n"
    "  --headless              no screen: a progress line a second and a summary\n"
    "  --json                  with --headless: one JSON object per event\n"
    "  --timeout S             collective/rendezvous timeout given to workers (default 300)\n"
    "  --stop-grace S          after a stop, seconds before SIGTERM (default 30)\n"
    "  --hang-after S          report a collective waited on this long as a hang, naming who\n"
    "                          waits for whom (default 10)\n"
    "  --log-dir DIR           keep each rank's stdout/stderr in DIR/rank-N.log (after restart K:\n"
    "                          DIR/rank-N.restart-K.log)\n"
    "  --max-restarts K        when a rank fails, stop the others and start every rank again,\n"
    "                          from the trainer's --ckpt-dir latest checkpoint if any, up to K\n"
    "                          times (torchrun's; default 0)\n"
    "  --record FILE           record every message (replayable, exportable; docs/RECORDING.md)\n"
    "  --publish ENDPOINT      re-publish the live stream on a ZeroMQ PUB socket (ipc:// or\n"
    "                          loopback tcp://; see examples/subscriber.py)\n"
    "\n"
    "several nodes (torchrun's shape; docs/CLUSTER.md):\n"
    "  --nnodes M              nodes in the job (default 1)\n"
    "  --node-rank K           this node (0 hosts the store and the screen; others run agents)\n"
    "  --rdzv HOST:PORT        node 0's address; it binds PORT (control) and PORT+1 (telemetry)\n"
    "  --rdzv-timeout S        every node must join within S seconds (default 60)\n"
    "  --keys FILE             the job's CURVE key file (0600); node 0 writes it when absent,\n"
    "                          the other nodes, workers and viewers need a copy\n"
    "  -h, --help, --version\n"
    "\n"
    "keys: c checkpoint  d destroy cleanly  p pause/resume  q quit (asks while training)\n"
    "      a abort now (SIGTERM, then SIGKILL)  f inject a fault (menu)\n"
    "      ? help  Tab/arrows move  Enter rank detail  1-6 zoom  h/H hide/show  l log  s/S sort\n"
    "\n"
    "trainer options: see `ddptop-worker --help`.\n";

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "ddptop: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see ddptop --help)\n");
    return 2;
}

static int parse_num(const char *opt, const char *v, double lo, double hi, double *out)
{
    if (!v) return usage_error("%s: missing value", opt);
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(d) || d < lo || d > hi) {
        fprintf(stderr, "ddptop: %s: expected a number in [%g, %g], got \"%s\"\n", opt, lo, hi, v);
        return 2;
    }
    *out = d;
    return 0;
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

/* Ask the worker to validate the trainer options and the device (no usable
 * GPU for --device cuda, no NCCL), so a typo is one line
 * before anything is launched. Returns 0 when valid, else 2 (printed). */
static int check_trainer_args(const char *wpath, char *const *args, int n, int world, const char *device,
                              const char *backend, int *gpus, char *resolved, size_t rlen)
{
    if (gpus) *gpus = 0;
    if (resolved && rlen) snprintf(resolved, rlen, "%s", device);
    int pfd[2];
    if (pipe(pfd)) return 0;
    pid_t pid = fork();
    if (pid < 0) { close(pfd[0]); close(pfd[1]); return 0; }
    if (pid == 0) {
        dup2(pfd[1], 2);
        dup2(pfd[1], 1);   /* on success the worker says "gpus N" */
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
        const char *g = strstr(msg, "gpus "), *dv = strstr(msg, "device ");
        if (gpus && g) *gpus = atoi(g + 5);
        if (resolved && rlen && dv) snprintf(resolved, rlen, "%.*s", (int)strcspn(dv + 7, " \n"), dv + 7);
        return 0;
    }
    msg[strcspn(msg, "\n")] = 0;
    const char *p = strncmp(msg, "ddptop-worker: ", 15) ? msg : msg + 15;
    fprintf(stderr, "ddptop: %s\n", *p ? p : "the trainer options were refused");
    return 2;
}

static int cmd_run(int argc, char **argv, const char *listen_ep)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    RunOptions o = {.nproc = cores >= 2 || cores < 1 ? 2 : 1, .timeout_s = 300, .stop_grace_s = 30, .hang_after_s = 10,
                    .device = "auto", .backend = "auto", .nnodes = 1, .node_rank = 0, .rdzv_timeout_s = 60};
    bool node_rank_set = false, nproc_set = false;
    if (listen_ep) o.listen_ep = listen_ep;
    int i = 0;
    for (; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double d;
        if (!strcmp(a, "--")) { i++; break; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(USAGE, stdout); return 0; }
        if (!strcmp(a, "-n") || !strcmp(a, "--nproc-per-node")) {
            if (parse_num(a, v, 1, 256, &d)) return 2;
            if (d != floor(d)) return usage_error("-n: expected a whole number, got \"%s\"", v);
            o.nproc = (int)d;
            nproc_set = true;
            i++;
        } else if (!strcmp(a, "--headless")) {
            o.headless = true;
        } else if (!strcmp(a, "--json")) {
            o.json = true;
        } else if (!strcmp(a, "--timeout")) {
            if (parse_num(a, v, 0.1, 86400, &o.timeout_s)) return 2;
            i++;
        } else if (!strcmp(a, "--hang-after")) {
            if (parse_num(a, v, 0.5, 86400, &o.hang_after_s)) return 2;
            i++;
        } else if (!strcmp(a, "--stop-grace")) {
            if (parse_num(a, v, 0, 86400, &o.stop_grace_s)) return 2;
            i++;
        } else if (!strcmp(a, "--max-restarts")) {
            if (parse_num(a, v, 0, 1000, &d)) return 2;
            if (d != floor(d)) return usage_error("--max-restarts: expected a whole number, got \"%s\"", v);
            o.max_restarts = (int)d;
            i++;
        } else if (!strcmp(a, "--log-dir")) {
            if (!v) return usage_error("%s: missing value", a);
            o.log_dir = v;
            i++;
        } else if (!strcmp(a, "--record")) {
            if (!v || !*v) return usage_error("%s: missing value", a);
            o.record_path = v;
            i++;
        } else if (!strcmp(a, "--publish")) {
            if (!v || !*v) return usage_error("%s: missing value", a);
            o.publish_ep = v;
            i++;
        } else if (!strcmp(a, "--nnodes")) {
            if (parse_num(a, v, 1, 4096, &d)) return 2;
            if (d != floor(d)) return usage_error("--nnodes: expected a whole number, got \"%s\"", v);
            o.nnodes = (int)d;
            i++;
        } else if (!strcmp(a, "--node-rank")) {
            if (parse_num(a, v, 0, 4095, &d)) return 2;
            if (d != floor(d)) return usage_error("--node-rank: expected a whole number, got \"%s\"", v);
            o.node_rank = (int)d;
            node_rank_set = true;
            i++;
        } else if (!strcmp(a, "--rdzv") || !strcmp(a, "--rdzv-endpoint")) {
            if (!v || !*v) return usage_error("%s: missing value (HOST:PORT)", a);
            o.rdzv = v;
            i++;
        } else if (!strcmp(a, "--rdzv-timeout")) {
            if (parse_num(a, v, 1, 86400, &o.rdzv_timeout_s)) return 2;
            i++;
        } else if (!strcmp(a, "--keys")) {
            if (!v || !*v) return usage_error("%s: missing value", a);
            o.keys_path = v;
            i++;
        } else if (!strcmp(a, "--backend")) {
            if (!v) return usage_error("%s: missing value", a);
            if (strcmp(v, "gloo") && strcmp(v, "nccl") && strcmp(v, "auto"))
                return usage_error("--backend: unknown backend \"%s\" (gloo, nccl, auto)", v);
            o.backend = v;
            i++;
        } else if (!strcmp(a, "--device")) {
            if (!v) return usage_error("%s: missing value", a);
            if (strcmp(v, "cpu") && strcmp(v, "cuda") && strcmp(v, "auto"))
                return usage_error("--device: unknown device \"%s\" (cpu, cuda, auto)", v);
            o.device = v;
            i++;
        } else {
            return usage_error("unknown option \"%s\"", a);
        }
    }
    if (o.json && !o.headless) return usage_error("%s needs --headless", "--json");
    if (o.publish_ep) {
        char perr[300];
        if (publisher_check_endpoint_keys(o.publish_ep, o.keys_path != NULL, perr, sizeof perr)) {
            fprintf(stderr, "ddptop: %s\n", perr);
            return 2;
        }
    }
    if (o.nnodes > 1 && !o.rdzv) return usage_error("%s needs --rdzv HOST:PORT (node 0's address)", "--nnodes");
    if (o.nnodes == 1 && (o.rdzv || node_rank_set))
        return usage_error("%s is for several nodes: add --nnodes M", o.rdzv ? "--rdzv" : "--node-rank");
    if (o.node_rank >= o.nnodes) {
        fprintf(stderr, "ddptop: --node-rank %d: expected 0..%d for --nnodes %d\n", o.node_rank, o.nnodes - 1, o.nnodes);
        return 2;
    }
    if (o.listen_ep && o.nnodes > 1) return usage_error("%s: workers started elsewhere connect to it; drop --nnodes", "listen");
    if (o.rdzv && strrchr(o.rdzv, ':') == NULL) return usage_error("--rdzv %s: expected HOST:PORT", o.rdzv);
    if (o.node_rank > 0 && !o.keys_path) {
        fprintf(stderr, "ddptop: --node-rank %d needs the job's key file: --keys FILE (node 0 wrote it; copy it here, "
                        "mode 0600)\n", o.node_rank);
        return 2;
    }
    if (!strcmp(o.backend, "nccl") && !strcmp(o.device, "cpu"))
        return usage_error("%s: NCCL reduces GPU memory; use --backend gloo with --device cpu", "--backend nccl --device cpu");
    if (o.log_dir) {
        struct stat st;
        if (stat(o.log_dir, &st) && mkdir(o.log_dir, 0755)) {
            fprintf(stderr, "ddptop: --log-dir %s: %s\n", o.log_dir, strerror(errno));
            return 2;
        }
    }

    /* A bad --record path is a usage error, found before anything runs;
     * an existing file is never overwritten (it may be someone's only copy). */
    if (o.record_path) {
        int fd = open(o.record_path, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0) {
            fprintf(stderr, "ddptop: --record %s: %s\n", o.record_path,
                    errno == EEXIST ? "file exists (choose a new name)" : strerror(errno));
            return 2;
        }
        close(fd);
        unlink(o.record_path);
    }
    static char desc[REC_DESC_MAX];
    size_t dl = (size_t)snprintf(desc, sizeof desc, "ddptop run");
    for (int k = 0; k < argc && dl < sizeof desc; k++)
        dl += (size_t)snprintf(desc + dl, sizeof desc - dl, " %s", argv[k]);
    o.description = desc;

    /* The embedded default job: long enough to watch and steer. */
    static char *dflt[] = {"--epochs", "30"};
    char *const *targs = argv + i;
    int ntargs = argc - i;
    if (ntargs == 0) { targs = dflt; ntargs = 2; }
    /* --timeout is ddptop's to set for every rank. */
    char **args = calloc((size_t)ntargs + 3, sizeof *args);
    char tbuf[32];
    if (!args) { fprintf(stderr, "ddptop: out of memory\n"); return 1; }
    snprintf(tbuf, sizeof tbuf, "%g", o.timeout_s);
    int n = 0;
    args[n++] = "--timeout";
    args[n++] = tbuf;
    for (int k = 0; k < ntargs; k++) args[n++] = targs[k];

    char wpath[PATH_MAX], cpath[PATH_MAX + 8];
    worker_path(wpath, sizeof wpath);
    /* cpu/ddptop-worker beside ddptop-worker (a CUDA build): the same worker
     * without the CUDA libraries, which cost every start 0.1 s of dynamic
     * loading. Used whenever the job runs on CPUs. */
    snprintf(cpath, sizeof cpath, "%s", wpath);
    char *slash = strrchr(cpath, '/');
    snprintf(slash ? slash + 1 : cpath, sizeof cpath - (size_t)(slash ? slash + 1 - cpath : 0), "cpu/ddptop-worker");
    bool have_cpu = !getenv("DDPTOP_WORKER") && access(cpath, X_OK) == 0;
    /* no NVIDIA device nodes, no driver: auto means cpu, no need to ask CUDA */
    bool maybe_gpu = access("/dev/nvidiactl", F_OK) == 0 || access("/proc/driver/nvidia", F_OK) == 0;
    const char *check_bin = have_cpu && (!strcmp(o.device, "cpu") || (!strcmp(o.device, "auto") && !maybe_gpu))
                                ? cpath : wpath;
    o.worker_path = check_bin;
    /* listen starts nothing: the workers bring their own options */
    int gpus = 0;
    char resolved[32] = "";
    int rc = o.listen_ep ? 0
                         : check_trainer_args(check_bin, args, n, o.nproc * o.nnodes, o.device, o.backend, &gpus,
                                              resolved, sizeof resolved);
    if (!rc && have_cpu && !strcmp(resolved, "cpu")) o.worker_path = cpath;
    /* torchrun's --nproc-per-node gpu: without -n, one rank per GPU when the
     * job runs on GPUs (checked again: --resume compares the world size) */
    if (!rc && !nproc_set && gpus > 0 && strcmp(o.device, "cpu") && gpus != o.nproc) {
        o.nproc = gpus;
        rc = check_trainer_args(check_bin, args, n, o.nproc * o.nnodes, o.device, o.backend, NULL, NULL, 0);
    }
    if (rc) { free(args); return rc; }
    o.trainer_args = args;
    o.n_trainer_args = n;
    rc = o.node_rank > 0 ? agent_run(&o) : run_job(&o);
    free(args);
    return rc;
}

static int cmd_sampler(int argc, char **argv)
{
    SamplerConfig c = {.size = -1, .world = 0, .rank = 0, .seed = 0, .shuffle = true, .drop_last = false};
    double d, epoch = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(USAGE, stdout); return 0; }
        if (!strcmp(a, "--size")) { if (parse_num(a, v, 0, 1 << 30, &d)) return 2; c.size = (int64_t)d; i++; }
        else if (!strcmp(a, "--world")) { if (parse_num(a, v, 1, 1 << 16, &d)) return 2; c.world = (int)d; i++; }
        else if (!strcmp(a, "--epoch")) { if (parse_num(a, v, 0, 1e15, &epoch)) return 2; i++; }
        else if (!strcmp(a, "--seed")) { if (parse_num(a, v, 0, 1.8e19, &d)) return 2; c.seed = (uint64_t)d; i++; }
        else if (!strcmp(a, "--no-shuffle")) c.shuffle = false;
        else if (!strcmp(a, "--drop-last")) c.drop_last = true;
        else return usage_error("sampler: unknown option \"%s\"", a);
    }
    if (c.size < 0) return usage_error("sampler: %s is required", "--size");
    if (c.world < 1) return usage_error("sampler: %s is required", "--world");
    char err[256];
    if (sampler_check(&c, err, sizeof err)) { fprintf(stderr, "ddptop: sampler: %s\n", err); return 2; }
    int64_t n = sampler_num_samples(&c);
    int64_t *idx = malloc((size_t)(n > 0 ? n : 1) * sizeof *idx);
    if (!idx) { fprintf(stderr, "ddptop: sampler: out of memory\n"); return 1; }
    for (int r = 0; r < c.world; r++) {
        c.rank = r;
        if (sampler_indices(&c, (int64_t)epoch, idx, err, sizeof err)) {
            fprintf(stderr, "ddptop: sampler: %s\n", err);
            free(idx);
            return 2;
        }
        printf("rank %d: ", r);
        for (int64_t k = 0; k < n; k++) printf(k ? ",%" PRId64 : "%" PRId64, idx[k]);
        putchar('\n');
    }
    free(idx);
    return 0;
}

int main(int argc, char **argv)
{
    setlocale(LC_ALL, "");
    if (argc > 1 && !strcmp(argv[1], "--version")) { printf("ddptop " DDPTOP_VERSION "\n"); return 0; }
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) { fputs(USAGE, stdout); return 0; }
    if (argc > 1 && !strcmp(argv[1], "sampler")) return cmd_sampler(argc - 2, argv + 2);
    if (argc > 1 && !strcmp(argv[1], "run")) return cmd_run(argc - 2, argv + 2, NULL);
    if (argc > 1 && !strcmp(argv[1], "listen")) {
        if (argc < 3 || argv[2][0] == '-') return usage_error("%s: missing ENDPOINT (tcp://HOST:PORT or ipc://PATH)", "listen");
        return cmd_run(argc - 3, argv + 3, argv[2]);
    }
    if (argc > 1 && !strcmp(argv[1], "attach")) return attach_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "export")) return export_main(argc - 2, argv + 2);
    if (argc > 1 && !strcmp(argv[1], "replay")) return replay_main(argc - 2, argv + 2);
    if (argc > 1 && argv[1][0] != '-') return usage_error("unknown command \"%s\"", argv[1]);
    return cmd_run(argc - 1, argv + 1, NULL);
}
