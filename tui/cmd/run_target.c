/* run_target.c — what every rank runs, found and checked before anything
 * starts. See run_target.h. Main thread.
 */
#include "cmd/run_target.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "base/clock.h"

/* The directory ddptop runs from (empty when /proc cannot say). */
static void self_dir(char *out, size_t n)
{
    ssize_t k = readlink("/proc/self/exe", out, n - 1);
    out[k > 0 ? k : 0] = 0;
    char *slash = strrchr(out, '/');
    if (slash) *slash = 0;
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
    char dir[PATH_MAX - 32];
    self_dir(dir, sizeof dir);
    if (!dir[0])
        snprintf(out, n, "ddptop-worker");
    else
        snprintf(out, n, "%s/ddptop-worker", dir);
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

/* The built-in trainer (its options, --resume among them), not another
 * program named by DDPTOP_WORKER: a torch script's arguments are the
 * script's (workers/python/ddptop-worker-py). */
static bool worker_is_trainer(const char *wpath)
{
    const char *base = strrchr(wpath, '/') ? strrchr(wpath, '/') + 1 : wpath;
    return !getenv("DDPTOP_WORKER") || !strcmp(base, "ddptop-worker");
}

/* name as execvp would find it (a name with a slash is taken as it is),
 * into out. True when it is an executable file. */
static bool find_program(const char *name, char *out, size_t n)
{
    struct stat st;
    if (strchr(name, '/')) {
        snprintf(out, n, "%s", name);
        return stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0;
    }
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t len = strcspn(path, ":");
        snprintf(out, n, "%.*s/%s", (int)(len ? len : 1), len ? path : ".", name);
        if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0) return true;
        path += len + (path[len] == ':');
    }
    return false;
}

/* The torch adapter (the ddptop/ package): DIR/python beside ddptop (the
 * build links it there), else the source tree above a build directory.
 * Absolute, into out; false when neither has it. */
static bool adapter_path(char *out, size_t n)
{
    char dir[PATH_MAX - 64], cand[PATH_MAX];
    self_dir(dir, sizeof dir);
    const char *rel[] = { "python", "../workers/python" };
    for (size_t k = 0; dir[0] && k < sizeof rel / sizeof rel[0]; k++) {
        snprintf(cand, sizeof cand, "%s/%s/ddptop/__main__.py", dir, rel[k]);
        if (access(cand, R_OK)) continue;
        cand[strlen(cand) - strlen("/ddptop/__main__.py")] = 0;
        char abs[PATH_MAX];
        snprintf(out, n, "%s", realpath(cand, abs) ? abs : cand);
        return true;
    }
    return false;
}

/* The workers' arguments: --timeout (ddptop's to set for every rank), then
 * the trainer's. The default job's length is the trainer's own default
 * (--epochs 30), so an unrelated option (`-- --lr 0.05`) keeps it. With no
 * trainer options at all (`ddptop`, `make run`) the built-in trainer is
 * also paced, RUN_DEFAULT_PACE steps a second, so the first screen lasts
 * minutes at a pace a person can follow; any trainer option (`-- --pace 0`)
 * is a job of the user's own, at full speed. */
static int trainer_args(int argc, char **argv, RunOptions *o, RunTargetBuf *b)
{
    if (!(b->args = calloc((size_t)argc + 5, sizeof *b->args))) return -1;
    int n = 0;
    b->args[n++] = "--timeout";
    b->args[n++] = b->timeout;
    char w[PATH_MAX];
    worker_path(w, sizeof w);
    if (argc == 0 && worker_is_trainer(w)) {
        b->args[n++] = "--pace";
        b->args[n++] = RUN_DEFAULT_PACE;
    }
    for (int k = 0; k < argc; k++) b->args[n++] = argv[k];
    o->trainer_args = b->args;
    o->n_trainer_args = n;
    return 0;
}

/* A script's or a command's ranks: "-m ddptop --timeout S" before the
 * script under the adapter, "-m" before a module, the user's arguments
 * after. */
static int program_args(int argc, char **argv, RunOptions *o, RunTargetBuf *b)
{
    if (!(b->args = calloc((size_t)argc + 8, sizeof *b->args))) return -1;
    int n = 0;
    bool inject = o->target != RUN_COMMAND && !o->no_inject;
    if (inject) {
        b->args[n++] = "-m";
        b->args[n++] = "ddptop";
        b->args[n++] = "--timeout";
        b->args[n++] = b->timeout;
    }
    if (o->target == RUN_MODULE) b->args[n++] = "-m";
    if (o->target != RUN_COMMAND) b->args[n++] = (char *)o->program;
    for (int k = 0; k < argc; k++) b->args[n++] = argv[k];
    o->trainer_args = b->args;
    o->n_trainer_args = n;
    return 0;
}

/* The worker's answer to a check: on success "gpus N" and "device D", and
 * from the torch adapter "spawns WHAT:LINE" for a script that starts its
 * own ranks (workers/python/ddptop/spawn.py). */
static void read_check_answer(const char *msg, int *gpus, char *resolved, size_t rlen, char *spawns)
{
    const char *g = strstr(msg, "gpus "), *dv = strstr(msg, "device "), *sp = strstr(msg, " spawns ");
    if (spawns && sp) snprintf(spawns, 96, "%.*s", (int)strcspn(sp + 8, " \n"), sp + 8);
    if (gpus && g) *gpus = atoi(g + 5);
    if (resolved && rlen && dv) snprintf(resolved, rlen, "%.*s", (int)strcspn(dv + 7, " \n"), dv + 7);
}

/* One check: bin with args, in check mode, for a world of `world` ranks. */
typedef struct {
    const char *bin;
    char *const *args;
    int n;
    int world;
    const char *device, *backend;
    const char *pythonpath; /* NULL: PYTHONPATH left alone */
    bool bare;              /* --no-inject: only the script, not the adapter's needs */
    double timeout_s;       /* --timeout: the check's deadline, within RUN_CHECK_MIN_S..RUN_CHECK_TIMEOUT_S */
    char *spawns;           /* out, 96 bytes: the adapter's "spawns WHAT:LINE" (NULL: not asked) */
} Check;

/* The child of run_check: the program in its check mode, its stdout and
 * stderr into the pipe. Never returns. */
static void exec_check(const Check *c, int pfd[2])
{
    dup2(pfd[1], 2);
    dup2(pfd[1], 1); /* on success the worker says "gpus N" */
    close(pfd[0]);
    close(pfd[1]);
    char **argv = calloc((size_t)c->n + 2, sizeof *argv);
    if (!argv) _exit(1);
    argv[0] = (char *)c->bin;
    for (int i = 0; i < c->n; i++) argv[i + 1] = c->args[i];
    setenv("DDPTOP_CHECK_ARGS", "1", 1);
    setenv("DDPTOP_DEVICE", c->device, 1);
    setenv("DDPTOP_BACKEND", c->backend, 1);
    if (c->bare) setenv("DDPTOP_NO_INJECT", "1", 1);
    if (c->pythonpath) {
        const char *old = getenv("PYTHONPATH");
        char pp[PATH_MAX * 2];
        snprintf(pp, sizeof pp, "%s%s%s", c->pythonpath, old && *old ? ":" : "", old && *old ? old : "");
        setenv("PYTHONPATH", pp, 1);
    }
    /* so --resume can compare the checkpoint's world size with -n */
    char w[16];
    snprintf(w, sizeof w, "%d", c->world);
    setenv("WORLD_SIZE", w, 1);
    execv(c->bin, argv);
    fprintf(stderr, "cannot run %s: %s\n", c->bin, strerror(errno));
    _exit(127);
}

/* How long a check may take: --timeout, within [RUN_CHECK_MIN_S,
 * RUN_CHECK_TIMEOUT_S]. Importing torch on a loaded machine takes seconds
 * (a short --timeout for the collectives must not refuse a good script);
 * an interpreter that never answers (a sitecustomize that waits, a wrapper
 * that hangs) must not hold ddptop forever. */
#define RUN_CHECK_TIMEOUT_S 60.0
#define RUN_CHECK_MIN_S     10.0

/* Runs c's program (in check mode, exec_check) for at most limit_s and
 * keeps the last msglen-1 bytes of its stdout and stderr in msg. *st: its
 * wait status; returns -1 when it could not start (the launch will say),
 * 1 when it timed out (and was killed with what it started), else 0. */
static int run_capture(const Check *c, double limit_s, char *msg, size_t msglen, int *st)
{
    msg[0] = 0;
    *st = 0;
    int pfd[2];
    if (pipe(pfd)) return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0); /* a timeout ends what it started too */
        exec_check(c, pfd);
    }
    setpgid(pid, pid);
    close(pfd[1]);
    /* All of it is read (a child left writing into a full pipe would never
     * exit), the last bytes kept: a Python traceback ends with the reason. */
    char chunk[4096];
    size_t got = 0, keep_max = msglen - 1;
    bool timed_out = false;
    int64_t deadline = mono_ms() + (int64_t)(limit_s * 1000);
    bool reaped = false;
    for (;;) {
        int64_t left = deadline - mono_ms();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        struct pollfd pf = { .fd = pfd[0], .events = POLLIN };
        /* a check that exited but left a process holding the pipe (a
         * wrapper's background job) is done: what it wrote is there */
        int pr = poll(&pf, 1, reaped ? 0 : (int)(left < 100 ? left : 100));
        if (pr < 0 && errno == EINTR) continue;
        if (pr == 0) {
            if (reaped) break;
            reaped = waitpid(pid, st, WNOHANG) == pid;
            continue;
        }
        ssize_t k = pr > 0 ? read(pfd[0], chunk, sizeof chunk) : -1;
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        size_t n = (size_t)k;
        if (n >= keep_max) {
            memcpy(msg, chunk + n - keep_max, keep_max);
            got = keep_max;
        } else {
            size_t keep = got + n > keep_max ? keep_max - n : got;
            memmove(msg, msg + got - keep, keep);
            memcpy(msg + keep, chunk, n);
            got = keep + n;
        }
    }
    msg[got] = 0;
    close(pfd[0]);
    /* its output closed: its exit, still within the deadline */
    while (!timed_out && !reaped) {
        reaped = waitpid(pid, st, WNOHANG) == pid;
        if (!reaped && mono_ms() >= deadline) timed_out = true;
        if (!reaped && !timed_out) poll(NULL, 0, 20);
    }
    kill(-pid, SIGKILL); /* whatever the check left running */
    if (!reaped)
        while (waitpid(pid, st, 0) < 0 && errno == EINTR) {}
    return timed_out ? 1 : 0;
}

/* The adapter's check exits with this when the interpreter has no torch
 * (workers/python/ddptop/runner.py, NO_TORCH): ddptop then names those
 * that have it. */
#define RUN_CHECK_NO_TORCH 3

/* Ask the program to validate its options and the device (no usable GPU
 * for --device cuda, no NCCL; a missing script), so a typo is one line
 * before anything is launched. Returns 0 when valid (also when the check
 * cannot run: the launch will say), RUN_CHECK_NO_TORCH (nothing printed,
 * the adapter's line in why) for an interpreter without torch when why is
 * given, else 2 (printed). */
static int run_check(const Check *c, int *gpus, char *resolved, size_t rlen, char *why, size_t why_len)
{
    if (gpus) *gpus = 0;
    if (resolved && rlen) snprintf(resolved, rlen, "%s", c->device);
    char msg[1024];
    int st = 0;
    double limit_s = c->timeout_s < RUN_CHECK_MIN_S       ? RUN_CHECK_MIN_S
                     : c->timeout_s > RUN_CHECK_TIMEOUT_S ? RUN_CHECK_TIMEOUT_S
                                                          : c->timeout_s;
    int rc = run_capture(c, limit_s, msg, sizeof msg, &st);
    if (rc < 0) return 0;
    if (rc > 0) {
        fprintf(stderr, "ddptop: %s did not answer the options check within %g s (a hung interpreter?)\n", c->bin,
                limit_s);
        return 2;
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        read_check_answer(msg, gpus, resolved, rlen, c->spawns);
        return 0;
    }
    /* the last line says why (a Python traceback ends with it) */
    size_t got = strlen(msg);
    while (got > 0 && (msg[got - 1] == '\n' || msg[got - 1] == '\r')) msg[--got] = 0;
    const char *p = strrchr(msg, '\n') ? strrchr(msg, '\n') + 1 : msg;
    if (!strncmp(p, "ddptop-worker: ", 15)) p += 15;
    if (!strncmp(p, "ddptop-py: ", 11)) p += 11;
    if (why && WIFEXITED(st) && WEXITSTATUS(st) == RUN_CHECK_NO_TORCH) {
        snprintf(why, why_len, "%s", p);
        return RUN_CHECK_NO_TORCH;
    }
    if (*p)
        fprintf(stderr, "ddptop: %s\n", p);
    else if (WIFSIGNALED(st))
        fprintf(stderr, "ddptop: %s was killed by signal %d while checking the options\n", c->bin, WTERMSIG(st));
    else
        fprintf(stderr, "ddptop: %s refused the options (exit %d, without a word)\n", c->bin, WEXITSTATUS(st));
    return 2;
}

/* Which worker binary runs the built-in trainer, checked with its
 * arguments: o->worker_path set, and o->nproc when -n was not given and
 * the job runs on GPUs (torchrun's --nproc-per-node gpu: one rank per
 * GPU). Returns 0 or 2. */
static int choose_worker(RunOptions *o, bool nproc_set, RunTargetBuf *b, bool maybe_gpu)
{
    worker_path(b->bin, sizeof b->bin);
    bool have_cpu = cpu_worker_path(b->bin, b->cpu_bin, sizeof b->cpu_bin);
    /* --backend nccl asks the worker that has NCCL, which says what is missing */
    bool cpu_job =
        !strcmp(o->device, "cpu") || (!strcmp(o->device, "auto") && !maybe_gpu && strcmp(o->backend, "nccl"));
    Check c = { .bin = have_cpu && cpu_job ? b->cpu_bin : b->bin,
                .args = o->trainer_args,
                .n = o->n_trainer_args,
                .world = o->nproc * o->nnodes,
                .device = o->device,
                .backend = o->backend,
                .timeout_s = o->timeout_s };
    o->worker_path = c.bin;
    o->trainer_resumes = worker_is_trainer(b->bin);
    /* listen starts nothing: the workers bring their own options */
    if (o->listen_ep) return 0;
    int gpus = 0;
    char resolved[32] = "";
    int rc = run_check(&c, &gpus, resolved, sizeof resolved, NULL, 0);
    if (rc) return rc;
    if (have_cpu && !strcmp(resolved, "cpu")) o->worker_path = b->cpu_bin;
    /* checked again with the new world: --resume compares the world size */
    if (!nproc_set && gpus > 0 && strcmp(o->device, "cpu") && gpus != o->nproc) {
        o->nproc = gpus;
        c.world = o->nproc * o->nnodes;
        rc = run_check(&c, NULL, NULL, 0, NULL, 0);
    }
    return rc;
}

/* The script is there: a file, or a directory with a __main__.py (as
 * python runs one). Said before anything about the interpreter, so a typo
 * is the first thing a user hears. Returns 0 or 2 (printed). */
static int check_script(const char *script)
{
    struct stat st;
    if (stat(script, &st) == 0 && S_ISDIR(st.st_mode)) {
        char main_py[PATH_MAX];
        snprintf(main_py, sizeof main_py, "%s/__main__.py", script);
        if (stat(main_py, &st) == 0 && S_ISREG(st.st_mode)) return 0;
        fprintf(stderr, "ddptop: %s: a directory without __main__.py (python runs only such a one)\n", script);
        return 2;
    }
    if (stat(script, &st) == 0 && S_ISREG(st.st_mode)) return 0;
    fprintf(stderr, "ddptop: %s: no such script\n", script);
    return 2;
}

/* Interpreters ddptop may suggest, each once: the file's real path and
 * its directory's (a venv's bin/python links to the system's python but is
 * another interpreter; /usr/bin/python3 and python3.11 beside it are one). */
typedef struct {
    char keys[64][2 * PATH_MAX + 2];
    int n;
} SeenPythons;

/* True the first time cand (an executable file) is seen. */
static bool first_sight(SeenPythons *seen, const char *cand)
{
    char real[PATH_MAX], dir[PATH_MAX], rdir[PATH_MAX], key[2 * PATH_MAX + 2];
    if (!realpath(cand, real)) return false;
    snprintf(dir, sizeof dir, "%s", cand);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    if (!realpath(slash ? (dir[0] ? dir : "/") : ".", rdir)) return false;
    snprintf(key, sizeof key, "%s|%s", real, rdir);
    for (int i = 0; i < seen->n; i++)
        if (!strcmp(seen->keys[i], key)) return false;
    if (seen->n == (int)(sizeof seen->keys / sizeof seen->keys[0])) return false;
    snprintf(seen->keys[seen->n++], sizeof seen->keys[0], "%s", key);
    return true;
}

#define TORCH_PROBE_S   5.0   /* one interpreter's answer */
#define TORCH_SEARCH_MS 20000 /* all of them */
#define TORCH_SHOWN     3     /* named in the line */

/* Asks cand whether it has torch (find_spec: without importing it); its
 * version into ver. */
static bool python_has_torch(const char *cand, char *ver, size_t n)
{
    char *args[] = { "-c", "import sys, importlib.util as u\n"
                           "if u.find_spec('torch') is None: sys.exit(1)\n"
                           "print('Python ' + sys.version.split()[0])" };
    Check c = { .bin = cand, .args = args, .n = 2, .world = 1, .device = "cpu", .backend = "gloo" };
    char msg[256];
    int st = 0;
    if (run_capture(&c, TORCH_PROBE_S, msg, sizeof msg, &st) != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
        strncmp(msg, "Python ", 7))
        return false;
    snprintf(ver, n, "%.*s", (int)strcspn(msg, "\r\n"), msg);
    return true;
}

/* One candidate: asked if not seen yet; appended to list when it has torch. */
static void consider_python(const char *cand, SeenPythons *seen, int64_t deadline, char *list, size_t n, int *found,
                            char *first, size_t fn)
{
    struct stat st;
    if (*found >= TORCH_SHOWN || mono_ms() >= deadline) return;
    if (stat(cand, &st) || !S_ISREG(st.st_mode) || access(cand, X_OK) || !first_sight(seen, cand)) return;
    char ver[64];
    if (!python_has_torch(cand, ver, sizeof ver)) return;
    size_t used = strlen(list);
    snprintf(list + used, n - used, "%s%s (%s)", *found ? ", " : "", cand, ver);
    if (!*found) snprintf(first, fn, "%s", cand);
    (*found)++;
}

/* Interpreters that have torch, for the line that says the chosen one
 * (self) has not: python3, python and python3.N in every directory of
 * PATH, then $VIRTUAL_ENV's, $CONDA_PREFIX's and the venvs (.venv, venv,
 * env) in the working directory and beside the script. At most
 * TORCH_SHOWN, into list as "PATH (Python X.Y.Z), ..."; the first into
 * first. Returns how many. */
static int torch_pythons(const char *self, const char *script, char *list, size_t n, char *first, size_t fn)
{
    static SeenPythons seen;
    seen.n = 0;
    list[0] = first[0] = 0;
    first_sight(&seen, self);
    int found = 0;
    int64_t deadline = mono_ms() + TORCH_SEARCH_MS;
    char cand[PATH_MAX];
    const char *path = getenv("PATH");
    for (const char *d = path ? path : ""; *d;) {
        size_t len = strcspn(d, ":");
        if (len) {
            const char *names[] = { "python3", "python" };
            for (size_t k = 0; k < 2; k++) {
                snprintf(cand, sizeof cand, "%.*s/%s", (int)len, d, names[k]);
                consider_python(cand, &seen, deadline, list, n, &found, first, fn);
            }
            for (int minor = 6; minor <= 20; minor++) {
                snprintf(cand, sizeof cand, "%.*s/python3.%d", (int)len, d, minor);
                consider_python(cand, &seen, deadline, list, n, &found, first, fn);
            }
        }
        d += len + (d[len] == ':');
    }
    const char *prefixes[] = { getenv("VIRTUAL_ENV"), getenv("CONDA_PREFIX") };
    for (size_t k = 0; k < 2; k++) {
        if (!prefixes[k] || !*prefixes[k]) continue;
        snprintf(cand, sizeof cand, "%s/bin/python", prefixes[k]);
        consider_python(cand, &seen, deadline, list, n, &found, first, fn);
    }
    char sdir[PATH_MAX];
    snprintf(sdir, sizeof sdir, "%s", script ? script : ".");
    char *slash = strrchr(sdir, '/');
    if (slash) *slash = 0;
    const char *dirs[] = { ".", slash ? (sdir[0] ? sdir : "/") : "." };
    const char *venvs[] = { ".venv", "venv", "env" };
    for (size_t k = 0; k < 2; k++)
        for (size_t v = 0; v < 3; v++) {
            snprintf(cand, sizeof cand, "%s/%s/bin/python", dirs[k], venvs[v]);
            consider_python(cand, &seen, deadline, list, n, &found, first, fn);
        }
    return found;
}

/* A script or module: the script first, then the interpreter, the
 * adapter, and the adapter's check (also for --no-inject: the script must
 * be there). An interpreter without torch is one line that names those
 * found with it. Returns 0 or 2. */
static int choose_python(RunOptions *o, bool nproc_set, RunTargetBuf *b, bool maybe_gpu)
{
    if (o->target == RUN_SCRIPT && check_script(o->program)) return 2;
    const char *py = o->python ? o->python : "python3";
    if (!find_program(py, b->bin, sizeof b->bin)) {
        char list[3 * (PATH_MAX + 32)], first[PATH_MAX];
        const char *script = o->target == RUN_SCRIPT ? o->program : NULL;
        if (!o->python && torch_pythons("", script, list, sizeof list, first, sizeof first))
            fprintf(stderr, "ddptop: python3: not found on PATH; these have torch: %s: use --python %s\n", list, first);
        else
            fprintf(stderr, "ddptop: --python %s: %s\n", py,
                    strchr(py, '/') ? "not an executable file" : "not found on PATH (name one with --python PATH)");
        return 2;
    }
    o->worker_path = b->bin;
    bool have_adapter = adapter_path(b->adapter, sizeof b->adapter);
    o->adapter_dir = have_adapter ? b->adapter : NULL;
    if (!have_adapter && !o->no_inject) {
        fprintf(stderr, "ddptop: the torch adapter (workers/python/ddptop) is not beside this ddptop: rebuild with "
                        "make, or run the script bare with --no-inject\n");
        return 2;
    }
    if (!have_adapter) return 0; /* nothing can check a bare script's module: the launch will say */
    char *check_args[] = { "-m", "ddptop", "--timeout", b->timeout, "-m", (char *)o->program };
    Check c = { .bin = b->bin,
                .args = check_args,
                .n = 6,
                .world = o->nproc * o->nnodes,
                /* auto without a GPU driver is cpu: the check need not import torch to learn it */
                .device = !strcmp(o->device, "auto") && !maybe_gpu ? "cpu" : o->device,
                .backend = o->backend,
                .pythonpath = b->adapter,
                .bare = o->no_inject,
                .timeout_s = o->timeout_s,
                .spawns = b->spawns };
    b->spawns[0] = 0;
    if (o->target == RUN_SCRIPT) {
        check_args[4] = (char *)o->program;
        c.n = 5;
    }
    int gpus = 0;
    char resolved[32] = "", why[1024] = "";
    int rc = run_check(&c, &gpus, resolved, sizeof resolved, why, sizeof why);
    if (rc == RUN_CHECK_NO_TORCH) {
        /* why: "/path/to/python3 (Python 3.11.7) cannot import torch: ..." */
        char *colon = strstr(why, " cannot import torch");
        if (colon) colon[strlen(" cannot import torch")] = 0;
        char list[3 * (PATH_MAX + 32)], first[PATH_MAX];
        const char *as = o->python ? "--python " : "";
        const char *script = o->target == RUN_SCRIPT ? o->program : NULL;
        if (torch_pythons(b->bin, script, list, sizeof list, first, sizeof first))
            fprintf(stderr, "ddptop: %s%s: %s; these can: %s: use --python %s\n", as, py, why, list, first);
        else
            fprintf(stderr,
                    "ddptop: %s%s: %s, nor can any python3 on PATH: install torch into it, or name the "
                    "interpreter that has it with --python PATH\n",
                    as, py, why);
        return 2;
    }
    if (rc) return rc;
    char *line = strrchr(b->spawns, ':');
    if (b->spawns[0] && line) {
        /* it starts its own ranks (mp.spawn): run once, follow them (tui/run/follow.c) */
        *line++ = 0;
        if (nproc_set && o->nproc * o->nnodes > 1) {
            fprintf(stderr,
                    "ddptop: -n %d: %s starts its own ranks (%s, line %s), so each of the %d launched copies would "
                    "start a world of its own: run it once, without -n (ddptop follows the ranks it starts)\n",
                    o->nproc * o->nnodes, o->program, b->spawns, line, o->nproc * o->nnodes);
            return 2;
        }
        if (o->nnodes > 1) {
            fprintf(stderr,
                    "ddptop: --nnodes %d: %s starts its own ranks (%s, line %s): ddptop follows such a script on "
                    "one node only; run it there without --nnodes\n",
                    o->nnodes, o->program, b->spawns, line);
            return 2;
        }
        o->nproc = 1;
        return 0;
    }
    if (!nproc_set && gpus > 0 && strcmp(o->device, "cpu")) o->nproc = gpus;
    return rc;
}

int run_target_prepare(RunOptions *o, bool nproc_set, int argc, char **argv, RunTargetBuf *b)
{
    snprintf(b->timeout, sizeof b->timeout, "%g", o->timeout_s);
    if ((o->target == RUN_TRAINER ? trainer_args(argc, argv, o, b) : program_args(argc, argv, o, b))) {
        fprintf(stderr, "ddptop: out of memory\n");
        return 1;
    }
    /* no NVIDIA device nodes, no driver: auto means cpu, no need to ask CUDA */
    bool maybe_gpu = access("/dev/nvidiactl", F_OK) == 0 || access("/proc/driver/nvidia", F_OK) == 0;
    if (o->target == RUN_TRAINER) return choose_worker(o, nproc_set, b, maybe_gpu);
    if (o->target != RUN_COMMAND) return o->listen_ep ? 0 : choose_python(o, nproc_set, b, maybe_gpu);
    if (!find_program(o->program, b->bin, sizeof b->bin)) {
        fprintf(stderr, "ddptop: --no-python %s: %s\n", o->program,
                strchr(o->program, '/') ? "not an executable file" : "not found on PATH");
        return 2;
    }
    o->worker_path = b->bin;
    /* a command may run `python -m ddptop` itself: the adapter is on its path */
    o->adapter_dir = adapter_path(b->adapter, sizeof b->adapter) ? b->adapter : NULL;
    return 0;
}

int run_target_trainer_help(void)
{
    char w[PATH_MAX], cpu[PATH_MAX + 8];
    worker_path(w, sizeof w);
    /* the CPU-only worker prints the same and maps no CUDA libraries */
    const char *bin = cpu_worker_path(w, cpu, sizeof cpu) ? cpu : w;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl(bin, "ddptop-worker", "--help", (char *)NULL);
        fprintf(stderr, "ddptop: --trainer-help: cannot run %s: %s\n", bin, strerror(errno));
        _exit(1);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) < 0) {
        fprintf(stderr, "ddptop: --trainer-help: %s\n", strerror(errno));
        return 1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

void run_target_done(RunTargetBuf *b)
{
    free(b->args);
    b->args = NULL;
}
