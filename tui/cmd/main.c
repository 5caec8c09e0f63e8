/* main.c — ddptop: the command line. The subcommand table (cmd.h), the
 * dispatch on it, `ddptop --help` (its keys paragraph from the key table,
 * view/keys.h) and the parsing helpers the subcommands share; each subcommand lives in its own file (run.c, sampler.c, ...).
 *
 * Usage errors print one line and exit 2. Main thread.
 */
#include "base/usage.h"
#include "cmd/cmd.h"

#include <errno.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/run_target.h"
#include "view/keys.h"

#define DDPTOP_VERSION "0.1.0"

/* run's own help (also `ddptop --help`'s body: `ddptop` alone is run). */
static const char HELP_RUN[] =
    "Launch one ddptop-worker per rank, train data-parallel (DDP semantics: NCCL on GPUs,\n"
    "Gloo on CPUs) and watch every rank live. With no arguments, the default job: 2 ranks (fewer\n"
    "on a 1-core machine), Fashion-MNIST when installed (else a synthetic set), 30 epochs, paced\n"
    "at " RUN_DEFAULT_PACE " steps a second so it can be watched (minutes; d stops it cleanly). Any trainer option\n"
    "makes it your own job at full speed: `ddptop run -- --epochs 2`, `ddptop run -- --pace 0`.\n"
    "Or your own PyTorch script, as torchrun runs it: the first argument that is no option is the\n"
    "script and the rest is its own (`ddptop run -n 4 train.py --epochs 3`). Every rank gets\n"
    "torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR/PORT,\n"
    "GROUP_RANK, ROLE_*, TORCHELASTIC_*) and runs under ddptop's torch adapter, unchanged.\n"
    "\n"
    "script options (before the script):\n"
    "  -m MODULE               run a module, as python -m (its arguments follow)\n"
    "  --no-python CMD         run any executable as every rank (its arguments follow)\n"
    "  --python PATH           the interpreter (default: python3 on PATH); it needs torch\n"
    "                          and nothing else (without it: one line naming those that have it)\n"
    "  --master-port P         the ranks' MASTER_PORT (default: a free port; one node only)\n"
    "  --no-inject             run PYTHON SCRIPT bare, without the adapter: ddptop shows the\n"
    "                          processes, exit codes and log tails only; a stop is SIGTERM\n"
    "\n"
    "run options:\n"
    "  -n, --nproc-per-node N  ranks to launch on this node (default: one per GPU when the job\n"
    "                          runs on GPUs, else 2, or the core count if smaller); torchrun's\n"
    "                          words too: auto (the default), gpu (one per GPU, --device cuda),\n"
    "                          cpu (one per core)\n"
    "  --device cpu|cuda|auto  compute device (default auto: cuda when a GPU is usable, else cpu)\n"
    "  --backend gloo|nccl|auto  collectives (default auto: nccl on cuda, gloo on cpu; gloo on\n"
    "                          cuda stages through host memory: more ranks than GPUs)\n"
    "  --headless              no screen: a progress line a second and a summary\n"
    "  --json                  with --headless: one JSON object per event\n"
    "  --timeout S             collective/rendezvous timeout given to workers (default 300)\n"
    "  --stop-grace S          after a stop, seconds before SIGTERM (default 30; 0 with\n"
    "                          --no-inject and --no-python, whose ranks cannot hear a stop)\n"
    "  --hang-after S          report a collective waited on this long as a hang, naming who\n"
    "                          waits for whom (default 10)\n"
    "  --log-dir DIR           keep each rank's stdout/stderr in DIR/rank-N.log (after restart K:\n"
    "                          DIR/rank-N.restart-K.log)\n"
    "  --max-restarts K        when a rank fails, stop the others and start every rank again,\n"
    "                          from the trainer's --ckpt-dir latest checkpoint if any (a script\n"
    "                          runs again as it was; TORCHELASTIC_RESTART_COUNT counts), up to K\n"
    "                          times (torchrun's; default 0)\n"
    "  --record FILE           record every message (replayable, exportable; docs/RECORDING.md)\n"
    "  --publish ENDPOINT      re-publish the live stream on a ZeroMQ PUB socket (ipc:// or\n"
    "                          loopback tcp://; see examples/subscriber.py)\n"
    "  --trainer-help          the built-in trainer's options (what follows --) and exit\n"
    "\n"
    "several nodes (torchrun's shape; docs/CLUSTER.md):\n"
    "  --nnodes M              nodes in the job (default 1)\n"
    "  --node-rank K           this node (0 hosts the store and the screen; others run agents)\n"
    "  --rdzv HOST:PORT        node 0's address; it binds PORT (control) and PORT+1 (telemetry);\n"
    "                          also --rdzv-endpoint\n"
    "  --rdzv-timeout S        every node must join within S seconds (default 60)\n"
    "  --keys FILE             the job's CURVE key file (0600); node 0 writes it when absent,\n"
    "                          the other nodes, workers and viewers need a copy\n"
    "  -h, --help\n"
    "\n"
    "torchrun's spellings work too: --name=value, '_' for '-' (--nproc_per_node=4,\n"
    "--max_restarts=3, --node_rank=1, --rdzv_endpoint=HOST:PORT), --standalone (one node)\n";

static const char HELP_LISTEN[] =
    "The screen for workers someone else started (srun, torchrun, by hand: DDPTOP_CONNECT=ENDPOINT\n"
    "in their environment; docs/CLUSTER.md). ENDPOINT is tcp://HOST:PORT (binds PORT and PORT+1;\n"
    "needs --keys) or ipc://PATH in a private directory. The world size comes from the first\n"
    "worker's hello; then it behaves as a run: the same panels, keys and verdicts, but it cannot\n"
    "signal processes it did not start.\n"
    "\n"
    "options:\n"
    "  --keys FILE             the job's CURVE key file (0600; written when absent); the workers\n"
    "                          need a copy (DDPTOP_KEYS=FILE)\n"
    "  --headless, --json, --record FILE, --publish ENDPOINT, --hang-after S, --timeout S,\n"
    "  --stop-grace S, --log-dir DIR   as for ddptop run (ddptop run --help)\n"
    "  -h, --help\n"
    "What only a launch uses (-n, --max-restarts, --nnodes, --master-port, trainer options after\n"
    "--, a script) is refused.\n";

static const char HELP_SAMPLER[] =
    "Print each rank's dataset indices for one epoch, as PyTorch's DistributedSampler gives\n"
    "them (the same sampler the workers use), one line per rank.\n"
    "\n"
    "options:\n"
    "  --size N                dataset size (required)\n"
    "  --world W               number of ranks (required)\n"
    "  --epoch E               the epoch, as set_epoch(E) (default 0)\n"
    "  --seed S                the sampler's seed (default 0)\n"
    "  --no-shuffle            shuffle=False\n"
    "  --drop-last             drop_last=True\n"
    "  -h, --help\n";

// clang-format off
const CmdEntry cmd_table[] = {
    {"run", cmd_run, "[run] [options] [-- TRAINER OPTIONS | SCRIPT.py ARGS | -m MODULE ARGS | --no-python CMD ARGS]",
     "train (the built-in trainer, a script, a command) and watch every rank; the default", HELP_RUN, false},
    {"sampler", cmd_sampler, "sampler --size N --world W [--epoch E] [--seed S] [--no-shuffle] [--drop-last]",
     "what DistributedSampler gives each rank", HELP_SAMPLER, true},
    {"export", cmd_export, "export FILE [--chrome-trace OUT.json] [--jsonl OUT] [--csv OUT]",
     "a recording to Perfetto/chrome://tracing, JSON lines or CSV", NULL, true},
    {"replay", cmd_replay, "replay FILE [--speed X] [--headless [--json]]",
     "play a recording in the live screen", NULL, true},
    {"listen", cmd_listen, "listen ENDPOINT [--keys FILE] [run options]",
     "the screen for workers started elsewhere (srun, torchrun)", HELP_LISTEN, false},
    {"attach", cmd_attach, "attach ENDPOINT [--control] [--keys FILE] [--wait S] [--headless [--json]]",
     "a second screen on a running job", NULL, true},
    {"stacks", cmd_stacks, "stacks ENDPOINT [--json] [--keys FILE] [--wait S]",
     "every rank's stacks of a running job, merged into one tree", NULL, true},
};
// clang-format on
const int cmd_table_len = (int)(sizeof cmd_table / sizeof cmd_table[0]);

/* What a screen's help ends with: the keys (the key table's live rows) and
 * the exit status. */
static void print_keys_and_exit(FILE *f)
{
    char keys[1024];
    keys_usage(keys, sizeof keys);
    fputs("\n", f);
    fputs(keys, f);
    fputs("\n"
          "exit status: 0 every rank ended cleanly and every checkpoint was written; 1 failed;\n"
          "  2 usage; 3 a checkpoint or the recording lost (full disk, ...); 130/143/129\n"
          "  stopped by Ctrl-C/SIGTERM/SIGHUP with the clean stop (the last line says at which\n"
          "  step, and the checkpoint)\n",
          f);
}

static const char TRAINER_POINTER[] =
    "\n"
    "trainer options: ddptop run --trainer-help (--steps and --epochs are the built-in\n"
    "trainer's; a script's own arguments are the script's).\n";

void cmd_print_help(FILE *f)
{
    for (int i = 0; i < cmd_table_len; i++) fprintf(f, "%s ddptop %s\n", i ? "      " : "usage:", cmd_table[i].usage);
    fputs("\ncommands (ddptop COMMAND --help: its own help):\n", f);
    for (int i = 0; i < cmd_table_len; i++) fprintf(f, "  %-9s %s\n", cmd_table[i].name, cmd_table[i].summary);
    fputs("\nddptop --version prints the version. ddptop with no command runs `ddptop run`:\n", f);
    fputs(HELP_RUN, f);
    print_keys_and_exit(f);
    fputs(TRAINER_POINTER, f);
}

const CmdEntry *cmd_find(const char *name)
{
    for (int i = 0; i < cmd_table_len; i++)
        if (!strcmp(cmd_table[i].name, name)) return &cmd_table[i];
    return NULL;
}

void cmd_print_cmd_help(FILE *f, const CmdEntry *c)
{
    fprintf(f, "usage: ddptop %s\n\n", c->usage);
    fputs(c->help, f);
    if (c->exec == cmd_run || c->exec == cmd_listen) {
        print_keys_and_exit(f);
        if (c->exec == cmd_run) fputs(TRAINER_POINTER, f);
    }
}

int cmd_usage_error(const char *fmt, const char *arg) { return usage_fail("ddptop", "ddptop --help", fmt, arg); }

/* A bound as people write it: 1073741824, not 1.07374e+09; 0.1 stays 0.1. */
static void put_bound(char *buf, size_t n, double x)
{
    if (x == floor(x) && fabs(x) < 1e20)
        snprintf(buf, n, "%.0f", x);
    else
        snprintf(buf, n, "%g", x);
}

/* v as a number in [lo, hi]; `what` says which kind the error names. */
static int parse_bounded(const char *opt, const char *what, const char *v, double lo, double hi, double *out)
{
    if (!v) return cmd_usage_error("%s: missing value", opt);
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(d) || d < lo || d > hi) {
        char l[32], h[32];
        put_bound(l, sizeof l, lo);
        put_bound(h, sizeof h, hi);
        fprintf(stderr, "ddptop: %s: expected %s in [%s, %s], got \"%s\"\n", opt, what, l, h, v);
        return 2;
    }
    *out = d;
    return 0;
}

int cmd_parse_num(const char *opt, const char *v, double lo, double hi, double *out)
{
    return parse_bounded(opt, "a number", v, lo, hi, out);
}

/* Digits only, read exactly: strtod took "0x10" as 16, " 2" as 2 and
 * "2.5" as 2 (sampler), and lost a seed's low bits above 2^53. */
int cmd_parse_u64(const char *opt, const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (!v) return cmd_usage_error("%s: missing value", opt);
    char *end;
    errno = 0;
    unsigned long long d = v[0] >= '0' && v[0] <= '9' ? strtoull(v, &end, 10) : 0;
    if (v[0] < '0' || v[0] > '9' || errno || *end || d < lo || d > hi) {
        fprintf(stderr, "ddptop: %s: expected an integer in [%" PRIu64 ", %" PRIu64 "], got \"%s\"\n", opt, lo, hi, v);
        return 2;
    }
    *out = d;
    return 0;
}

int cmd_parse_int(const char *name, const char *v, int lo, int hi, int *out)
{
    uint64_t d;
    if (cmd_parse_u64(name, v, lo > 0 ? (uint64_t)lo : 0, hi > 0 ? (uint64_t)hi : 0, &d)) return 2;
    *out = (int)d;
    return 0;
}

/* A command whose output is what was asked for and that could not write
 * it (a full disk, a closed stdout) did not do it: exit 1, not 0 (run and
 * listen are judged by their ranks; their lines are a view). */
static int stdout_done(int rc, const char *who)
{
    int e = fflush(stdout) ? errno : 0;
    bool earlier = !e && ferror(stdout); /* an earlier flush failed: its errno is gone */
    if ((!e && !earlier) || rc != 0) return rc;
    fprintf(stderr, "ddptop %s: writing to stdout: %s\n", who, earlier ? "a write failed" : strerror(e));
    return 1;
}

int main(int argc, char **argv)
{
    setlocale(LC_ALL, "");
    /* The user's characters (UTF-8 or not), never their decimal comma:
     * under de_DE.UTF-8 --json printed "t":0,219 (not JSON), export's CSV
     * split every number in two, and "--hang-after 0.5" was refused. */
    setlocale(LC_NUMERIC, "C");
    if (argc > 1 && !strcmp(argv[1], "--version")) {
        printf("ddptop " DDPTOP_VERSION "\n");
        return stdout_done(0, "--version");
    }
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        cmd_print_help(stdout);
        return stdout_done(0, "--help");
    }
    if (argc > 1 && argv[1][0] != '-') {
        const CmdEntry *c = cmd_find(argv[1]);
        if (!c) return cmd_usage_error("unknown command \"%s\"", argv[1]);
        int rc = c->exec(argc - 2, argv + 2);
        return c->output_is_result ? stdout_done(rc, c->name) : rc;
    }
    /* no subcommand: run, with every argument its own */
    return cmd_table[0].exec(argc - 1, argv + 1);
}
