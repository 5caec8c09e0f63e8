/* run.c — `ddptop run` (also what `ddptop` with no subcommand does) and
 * `ddptop listen ENDPOINT`: the options into a RunOptions, the checks that
 * make a bad command line one line before anything starts, and the
 * hand-over to the run loop (tui/run/) or, on node K > 0, to the node agent
 * (tui/cluster/). torchrun's forms: the first argument that is no option
 * is the script (or -m MODULE, or --no-python CMD) and everything after it
 * is its own; "--" starts the built-in trainer's options. What the ranks
 * run is found and checked in run_target.c.
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
#include <unistd.h>

#include "cluster/agent.h"
#include "cmd/run_target.h"
#include "net/publish.h"
#include "record/record.h"
#include "run/run.h"

/* What the parse saw beyond RunOptions. */
typedef struct {
    bool node_rank_set, nproc_set, stop_grace_set;
    bool standalone;   /* --standalone (torchrun's): one node, which is the default */
    bool help;         /* -h: print the help, exit 0 */
    bool trainer_help; /* --trainer-help: the built-in trainer's options, exit 0 */
    bool no_python;    /* --no-python: the first argument is a command */
    bool dashdash;     /* "--" came: the built-in trainer's options follow */
    int first_trainer; /* argv index of the first trainer (or script) argument */
} RunParse;

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
    {"--record", NULL, OPT_STR, AT(record_path), 0, 0, "%s: missing file name", NULL},
    {"--publish", NULL, OPT_STR, AT(publish_ep), 0, 0, "%s: missing value", NULL},
    {"--nnodes", NULL, OPT_INT, AT(nnodes), 1, 4096, "--nnodes", NULL},
    {"--node-rank", NULL, OPT_INT, AT(node_rank), 0, 4095, "--node-rank", NULL},
    {"--rdzv", "--rdzv-endpoint", OPT_STR, AT(rdzv), 0, 0, "%s: missing value (HOST:PORT)", NULL},
    {"--rdzv-timeout", NULL, OPT_NUM, AT(rdzv_timeout_s), 1, 86400, NULL, NULL},
    {"--keys", NULL, OPT_STR, AT(keys_path), 0, 0, "%s: missing value", NULL},
    {"--backend", NULL, OPT_CHOICE, AT(backend), 0, 0, "--backend: unknown backend \"%s\" (gloo, nccl, auto)",
     backends},
    {"--device", NULL, OPT_CHOICE, AT(device), 0, 0, "--device: unknown device \"%s\" (cpu, cuda, auto)", devices},
    {"--python", NULL, OPT_STR, AT(python), 0, 0, "%s: missing value (the interpreter, e.g. python3)", NULL},
    {"--no-inject", NULL, OPT_FLAG, AT(no_inject), 0, 0, NULL, NULL},
    {"--master-port", NULL, OPT_INT, AT(master_port), 1, 65535, "--master-port", NULL},
};
// clang-format on
#undef AT

static const RunOpt *find_opt(const char *a)
{
    for (size_t k = 0; k < sizeof run_opts / sizeof run_opts[0]; k++)
        if (!strcmp(a, run_opts[k].name) || (run_opts[k].alias && !strcmp(a, run_opts[k].alias))) return &run_opts[k];
    return NULL;
}

/* torchrun's spellings of a long option, as its argparse takes them:
 * "--name=value", and '_' for '-' ("--nproc_per_node=4", the form of most
 * tutorials). The name goes into buf with '-'; *inline_v the text after
 * '=', or NULL. Returns buf, or a itself when neither form is used. */
static const char *torchrun_spelling(const char *a, char *buf, size_t len, const char **inline_v)
{
    *inline_v = NULL;
    if (strncmp(a, "--", 2) || !a[2]) return a;
    const char *eq = strchr(a, '=');
    size_t n = eq ? (size_t)(eq - a) : strlen(a);
    if (!eq && !strchr(a, '_')) return a;
    if (n >= len) return a; /* too long for any option: unknown as typed */
    for (size_t k = 0; k < n; k++) buf[k] = k >= 2 && a[k] == '_' ? '-' : a[k];
    buf[n] = '\0';
    if (eq) *inline_v = eq + 1;
    return buf;
}

/* -n's words, as torchrun's --nproc-per-node takes them: auto (the
 * default: one rank per GPU when the job runs on GPUs, else as without
 * -n), gpu (one per GPU; the job on GPUs), cpu (one per core). Returns 1
 * when v was one of them (o and p set), else 0. */
static int nproc_word(const char *v, RunOptions *o, RunParse *p)
{
    if (!v) return 0;
    if (!strcmp(v, "auto")) return 1;
    if (!strcmp(v, "gpu")) {
        if (!strcmp(o->device, "auto")) o->device = "cuda";
        return 1;
    }
    if (!strcmp(v, "cpu")) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        o->nproc = cores < 1 ? 1 : cores > 256 ? 256 : (int)cores;
        p->nproc_set = true;
        return 1;
    }
    return 0;
}

/* Option d (as typed: a) with value v into o. Returns 0 or 2 (said why). */
static int set_opt(const RunOpt *d, const char *a, const char *v, RunOptions *o)
{
    void *field = (char *)o + d->off;
    switch (d->kind) {
    case OPT_FLAG: *(bool *)field = true; return 0;
    case OPT_NUM: return cmd_parse_num(a, v, d->lo, d->hi, (double *)field);
    case OPT_INT: return cmd_parse_int(d->msg, v, (int)d->lo, (int)d->hi, (int *)field);
    case OPT_STR:
    case OPT_PATH:
        /* "--record --": the "--" that starts the trainer's options is no value */
        if (!v || !strcmp(v, "--") || (d->kind == OPT_STR && !*v)) return cmd_usage_error(d->msg, a);
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

/* The options up to "--" (the trainer's follow) or up to the first
 * argument that is no option: the script (or -m MODULE, or with
 * --no-python the command), whose own arguments follow (torchrun's rule).
 * An unknown option is an error. Returns 0 or 2 (said why). */
static int parse_run_args(int argc, char **argv, RunOptions *o, RunParse *p)
{
    int i = 0;
    for (; i < argc; i++) {
        const char *typed = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL, *inl;
        char name[40];
        const char *a = torchrun_spelling(typed, name, sizeof name, &inl);
        if (!strcmp(a, "--")) {
            p->dashdash = true;
            i++;
            break;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            p->help = true;
            return 0;
        }
        if (!strcmp(a, "--trainer-help")) {
            p->trainer_help = true;
            return 0;
        }
        if (!strcmp(a, "--no-python")) {
            if (inl) return cmd_usage_error("%s takes no value", typed);
            p->no_python = true;
            continue;
        }
        if (!strcmp(a, "-m")) {
            if (!v || !*v) return cmd_usage_error("%s: missing MODULE (ddptop run -m MODULE [ARGS])", a);
            o->target = RUN_MODULE;
            o->program = v;
            i += 2;
            break;
        }
        if (a[0] != '-' || !a[1]) { /* the script; "-" is no option either */
            o->target = RUN_SCRIPT;
            o->program = a;
            i++;
            break;
        }
        if (!strcmp(a, "--standalone")) {
            if (inl) return cmd_usage_error("%s takes no value", typed);
            p->standalone = true;
            continue;
        }
        const RunOpt *d = find_opt(a);
        if (!d) return cmd_usage_error("unknown option \"%s\"", typed);
        if (inl && d->kind == OPT_FLAG) return cmd_usage_error("%s takes no value", typed);
        const char *val = inl ? inl : v;
        bool is_nproc = d->off == offsetof(RunOptions, nproc);
        if (is_nproc && nproc_word(val, o, p)) {
            i += !inl;
            continue;
        }
        if (is_nproc && val && *val && strspn(val, "0123456789") != strlen(val))
            return cmd_usage_error("-n %s: expected a count of ranks (1 to 256) or auto, gpu, cpu", val);
        if (set_opt(d, a, val, o)) return 2;
        p->nproc_set |= is_nproc;
        p->node_rank_set |= d->off == offsetof(RunOptions, node_rank);
        p->stop_grace_set |= d->off == offsetof(RunOptions, stop_grace_s);
        if (d->kind != OPT_FLAG && !inl) i++;
    }
    p->first_trainer = i;
    if (p->no_python) {
        if (o->target == RUN_MODULE)
            return cmd_usage_error("%s: -m runs a module with python; drop one", "--no-python");
        if (o->target != RUN_SCRIPT)
            return cmd_usage_error("%s: missing CMD (ddptop run --no-python CMD [ARGS])", "--no-python");
        o->target = RUN_COMMAND;
    }
    if (o->target == RUN_TRAINER && (o->no_inject || o->python))
        return cmd_usage_error("%s is for scripts: ddptop run [options] SCRIPT.py [ARGS]",
                               o->no_inject ? "--no-inject" : "--python");
    if (o->target == RUN_COMMAND && (o->no_inject || o->python))
        return cmd_usage_error("%s: --no-python runs CMD as it is", o->no_inject ? "--no-inject" : "--python");
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
    if (p->standalone && (o->nnodes > 1 || o->rdzv || p->node_rank_set))
        return cmd_usage_error("%s is one node (torchrun's): drop --nnodes, --node-rank and --rdzv", "--standalone");
    if (o->nnodes > 1 && !o->rdzv) return cmd_usage_error("%s needs --rdzv HOST:PORT (node 0's address)", "--nnodes");
    if (o->master_port && o->nnodes > 1)
        return cmd_usage_error("%s is for one node: several nodes use --rdzv's PORT+2", "--master-port");
    if (o->nnodes == 1 && (o->rdzv || p->node_rank_set))
        return cmd_usage_error("%s is for several nodes: add --nnodes M", o->rdzv ? "--rdzv" : "--node-rank");
    if (o->node_rank >= o->nnodes) {
        fprintf(stderr, "ddptop: --node-rank %d: expected 0..%d for --nnodes %d\n", o->node_rank, o->nnodes - 1,
                o->nnodes);
        return 2;
    }
    if (o->listen_ep && o->target != RUN_TRAINER)
        return cmd_usage_error("listen %s: workers started elsewhere connect to it; it starts no script", o->program);
    if (o->listen_ep && o->master_port)
        return cmd_usage_error("%s: listen starts no rank to tell it", "--master-port");
    if (o->listen_ep && o->nnodes > 1)
        return cmd_usage_error("%s: workers started elsewhere connect to it; drop --nnodes", "listen");
    /* a key file guards tcp sockets: a one-node job binds none (ipc://),
     * so --keys there was read by nothing and guarded nothing */
    bool tcp_listen = o->listen_ep && !strncmp(o->listen_ep, "tcp://", 6);
    bool tcp_publish = o->publish_ep && !strncmp(o->publish_ep, "tcp://", 6);
    if (o->keys_path && o->nnodes == 1 && !tcp_listen && !tcp_publish)
        return cmd_usage_error("%s: a one-node job has no tcp socket to guard (its sockets are ipc://, private); "
                               "keys are for --nnodes, listen tcp:// and --publish tcp://",
                               "--keys");
    /* what only a launch uses was taken and dropped without a word */
    if (o->listen_ep && p->dashdash)
        return cmd_usage_error("%s: the workers started elsewhere bring their own options; drop them", "listen --");
    if (o->listen_ep && p->nproc_set)
        return cmd_usage_error("%s: the world size comes from the workers' hello; drop it", "listen -n");
    if (o->listen_ep && o->max_restarts > 0)
        return cmd_usage_error("%s: only ranks ddptop launched can be restarted; drop it", "listen --max-restarts");
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
    /* The logs must be writable there: a file, /proc or a read-only
     * directory gave every rank no log at all, and the run still said
     * "logs in DIR". A file created and removed proves it, even for root. */
    if (o->log_dir) {
        struct stat st;
        if (stat(o->log_dir, &st) && mkdir(o->log_dir, 0755)) {
            fprintf(stderr, "ddptop: --log-dir %s: %s\n", o->log_dir, strerror(errno));
            return 2;
        }
        if (stat(o->log_dir, &st) || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "ddptop: --log-dir %s: not a directory\n", o->log_dir);
            return 2;
        }
        char probe[PATH_MAX];
        int fd = -1;
        errno = ENAMETOOLONG;
        if (snprintf(probe, sizeof probe, "%s/.ddptop-log-XXXXXX", o->log_dir) < (int)sizeof probe) fd = mkstemp(probe);
        if (fd < 0) {
            fprintf(stderr, "ddptop: --log-dir %s: cannot write a log there: %s\n", o->log_dir, strerror(errno));
            return 2;
        }
        close(fd);
        unlink(probe);
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

/* "ddptop run -- train.py": after "--" come the built-in trainer's
 * options; a script there is a habit from torchrun's "--" (or from the
 * old shim). Returns 2 (said how) or 0. */
static int check_dashdash(int argc, char **argv, const RunParse *p)
{
    if (!p->dashdash || getenv("DDPTOP_WORKER") || p->first_trainer >= argc) return 0;
    const char *a = argv[p->first_trainer];
    size_t n = strlen(a);
    if (n > 3 && !strcmp(a + n - 3, ".py"))
        return cmd_usage_error("-- %s: what follows \"--\" are the built-in trainer's options; run a script as "
                               "ddptop run [options] SCRIPT.py [ARGS]",
                               a);
    return 0;
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
        cmd_print_cmd_help(stdout, cmd_find(listen_ep ? "listen" : "run"));
        return 0;
    }
    if (p.trainer_help) return run_target_trainer_help();
    if ((rc = check_run_options(&o, &p)) || (rc = check_dashdash(argc, argv, &p))) return rc;
    /* DDPTOP_PARSE_ONLY (tests: the README's commands parse): the command
     * line passed every check that needs nothing started; nothing runs */
    if (getenv("DDPTOP_PARSE_ONLY")) {
        printf("ddptop: %s: the command line parses\n", listen_ep ? "listen" : "run");
        return 0;
    }
    o.description = describe(argc, argv);
    /* a bare program cannot hear ddptop's stop command: the ladder starts
     * at SIGTERM, as torchrun's does (--stop-grace S keeps the clean stop
     * for a command that speaks the protocol) */
    if ((o.no_inject || o.target == RUN_COMMAND) && !p.stop_grace_set) o.stop_grace_s = 0;

    RunTargetBuf tb = { .args = NULL };
    rc = run_target_prepare(&o, p.nproc_set, argc - p.first_trainer, argv + p.first_trainer, &tb);
    if (!rc) rc = o.node_rank > 0 ? agent_run(&o) : run_job(&o);
    run_target_done(&tb);
    return rc;
}

int cmd_run(int argc, char **argv) { return run_main(argc, argv, NULL); }

/* listen ENDPOINT [run options]: the endpoint first (or --help). */
int cmd_listen(int argc, char **argv)
{
    if (argc >= 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
        cmd_print_cmd_help(stdout, cmd_find("listen"));
        return 0;
    }
    if (argc < 1 || argv[0][0] == '-')
        return cmd_usage_error("%s: missing ENDPOINT (tcp://HOST:PORT or ipc://PATH)", "listen");
    return run_main(argc - 1, argv + 1, argv[0]);
}
