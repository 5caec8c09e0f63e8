/* main.c — ddptop-worker: one rank of a ddptop job.
 *
 * Identity comes from the launcher's environment (torchrun's RANK,
 * WORLD_SIZE, ... or Slurm's), ddptop's endpoints from DDPTOP_CTL and
 * DDPTOP_TEL (ddptop run) or DDPTOP_CONNECT with DDPTOP_KEYS (another
 * host), all read by identity.c; docs/CLUSTER.md lists them.
 * DDPTOP_PING_TIMEOUT (seconds, default 15, 0 off): once ddptop's first
 * ping has come, a rank that hears nothing from it for that long, while
 * it is not stopped, takes it for gone (as when its parent ddptop dies):
 * the ranks agree on a stop, rank 0 writes the final checkpoint, exit 1.
 * Exit status: 0 clean, 1 runtime failure, 2 usage or input error.
 */
#include <cblas.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <zmq.h>

#include "train/args.h"
#include "ckpt/ckpt.h"
#include "data/dataset.h"
#include "wire/fault.h"
#include "nn/model.h"
#include "comm/comm.h"
#include "cuda/cuda_mlp.h"
#include "cuda/gpu.h"
#include "link/identity.h"
#include "net/curve.h"
#include "train/trainer.h"
#include "link/uplink.h"

/* DDPTOP_PING_TIMEOUT: seconds in [0, 86400], default 15. */
static int ping_timeout_s(int *out, char *err, size_t errlen)
{
    *out = 15;
    return identity_env_int(NULL, NULL, "DDPTOP_PING_TIMEOUT", 0, 86400, out, err, errlen) < 0 ? -1 : 0;
}

/* The inputs a rank would fail on at start, checked once up front: the
 * dataset files, the --init-from weights (names and shapes), the --resume
 * checkpoint (every check a rank makes; the world size too when
 * WORLD_SIZE is set, as ddptop can do for this check). */
static int check_inputs(const TrainerArgs *a, char *err, size_t errlen)
{
    int in = a->dims[0], classes = a->dims[a->n_linear];
    /* a checkpoint the run will write but cannot is found now, not at the
     * end (with neither, only a `c` writes one; its failure is told then) */
    if ((a->final_ckpt || a->ckpt_every) && ckpt_check_dir(a->ckpt_dir, err, errlen)) return -1;
    if (!strcmp(a->dataset, "fashion-mnist")) {
        if (in != 784 || classes != 10) {
            snprintf(err, errlen, "--model %s does not fit fashion-mnist (784 inputs, 10 classes)", a->model);
            return -1;
        }
        if (!dataset_fashion_mnist_present(a->data_dir)) {
            snprintf(err, errlen,
                     "fashion-mnist not found in %s (install dataset-fashion-mnist, or use --dataset synthetic)",
                     a->data_dir);
            return -1;
        }
    }
    if (a->init_from[0]) {
        Mlp m;
        if (mlp_init(&m, a->dims, a->n_linear, 1, err, errlen)) return -1;
        int rc = ckpt_load_model(a->init_from, &m, err, errlen);
        mlp_done(&m);
        if (rc) return -1;
    }
    int world = 0;
    if (identity_world(NULL, NULL, &world, err, errlen)) return -1;
    for (int i = 0; i < a->faults.n; i++) {
        const Fault *f = &a->faults.f[i];
        if (world > 0 && f->rank >= world) {
            snprintf(err, errlen, "--fault %s: rank %d does not exist (ranks 0..%d)", fault_name(f->kind), f->rank,
                     world - 1);
            return -1;
        }
    }
    if (a->resume[0]) {
        char dir[4096];
        if (ckpt_resolve(a->resume, dir, sizeof dir, err, errlen)) return -1;
        Mlp m;
        Optim o;
        CkptMeta meta;
        if (mlp_init(&m, a->dims, a->n_linear, 1, err, errlen)) return -1;
        if (optim_init(&o, &a->optim, m.n_params, err, errlen)) {
            mlp_done(&m);
            return -1;
        }
        int rc = ckpt_load(dir, &m, &o, &meta, world, NULL, 0, err, errlen);
        optim_done(&o);
        mlp_done(&m);
        if (rc) return -1;
    }
    return 0;
}

/* A GPU error as a user reads it: without the "file.c:NN: " it carries
 * for developers. */
static const char *plain_reason(const char *e)
{
    const char *colon = strstr(e, ": ");
    if (colon && colon > e && colon - e < 24 && (strstr(e, ".c:") || strstr(e, ".cu:")) &&
        (strstr(e, ".c:") < colon || strstr(e, ".cu:") < colon))
        return colon + 2;
    return e;
}

/* The device and backend ddptop asked for (DDPTOP_DEVICE: cpu, cuda or
 * auto; DDPTOP_BACKEND: gloo, nccl or auto; unset is auto), resolved: auto
 * is cuda when a GPU is usable, then nccl when it is built in, else cpu and
 * gloo. Refused with one line: cuda without a usable GPU, nccl on the CPU,
 * nccl not built in. Also run for DDPTOP_CHECK_ARGS, so ddptop says it
 * before it launches anything. */
static int pick_device(char *dev, size_t dn, char *be, size_t bn, char *err, size_t errlen)
{
    const char *d = getenv("DDPTOP_DEVICE"), *b = getenv("DDPTOP_BACKEND");
    if (!d || !*d) d = "auto";
    if (!b || !*b) b = "auto";
    if (strcmp(d, "cpu") && strcmp(d, "cuda") && strcmp(d, "auto")) {
        snprintf(err, errlen, "--device %s: unknown device (cpu, cuda, auto)", d);
        return -1;
    }
    if (strcmp(b, "gloo") && strcmp(b, "nccl") && strcmp(b, "auto")) {
        snprintf(err, errlen, "--backend %s: unknown backend (gloo, nccl, auto)", b);
        return -1;
    }
    if (!strcmp(d, "cpu") && !strcmp(b, "nccl")) {
        snprintf(err, errlen,
                 "--backend nccl needs --device cuda (NCCL reduces GPU memory): use --backend gloo on CPUs");
        return -1;
    }
    char gerr[256] = "";
    int n = 0;
    bool gpu = strcmp(d, "cpu") && gpu_count(&n, gerr, sizeof gerr) == 0 && n > 0;
    if (!strcmp(d, "cuda") && !gpu) {
        snprintf(err, errlen, "--device cuda: %s",
                 gerr[0] ? plain_reason(gerr) : "no usable CUDA GPU: use --device cpu");
        return -1;
    }
    if (!strcmp(d, "auto")) d = gpu ? "cuda" : "cpu";
    if (!strcmp(b, "auto")) b = !strcmp(d, "cuda") && comm_available("nccl") ? "nccl" : "gloo";
    if (!strcmp(b, "nccl") && !strcmp(d, "cpu")) {
        /* the reason without its own advice (": use --device cpu") */
        const char *why = gerr[0] ? plain_reason(gerr) : "no usable CUDA GPU";
        const char *advice = strstr(why, ": use ");
        snprintf(err, errlen,
                 "--backend nccl needs a CUDA GPU: %.*s: use --backend gloo, or leave --backend auto (gloo on CPUs)",
                 advice ? (int)(advice - why) : (int)strlen(why), why);
        return -1;
    }
    if (!strcmp(b, "nccl") && !comm_available("nccl")) {
        snprintf(err, errlen, "--backend nccl: ddptop-worker was built without NCCL: use --backend gloo");
        return -1;
    }
    snprintf(dev, dn, "%s", d);
    snprintf(be, bn, "%s", b);
    return 0;
}

/* What this binary can run on, and with which libraries: the backends that
 * were compiled in (mk/cuda.mk builds CUDA and NCCL wherever nvcc is found)
 * and the versions loaded at run time. */
static void print_version(void)
{
    int maj, min, pat;
    zmq_version(&maj, &min, &pat);
    const char *nccl = comm_version("nccl"), *cuda = gpu_version(), *blas = cuda_mlp_version();
    printf("ddptop-worker 0.1.0\n");
    printf("backends: gloo (cpu%s)%s\n", cuda ? "; cuda, staged through host memory" : "", nccl ? ", nccl (cuda)" : "");
    printf("devices: cpu%s\n", cuda ? ", cuda" : "");
    printf("gloo: %s\n", comm_version("gloo"));
    printf("nccl: %s\n", nccl ? nccl : gpu_compiled() ? "not built in (no nccl.h at build time)" : gpu_missing());
    printf("cuda: %s\n", cuda ? cuda : gpu_missing());
    if (blas) printf("cublas: %s\n", blas);
    printf("zeromq: %d.%d.%d\nopenblas: %s\n", maj, min, pat, openblas_get_config());
}

int main(int argc, char **argv)
{
    char err[512];
    if (argc > 1 && !strcmp(argv[1], "--version")) {
        print_version();
        return 0;
    }

    TrainerArgs a;
    trainer_args_defaults(&a);
    int rc = trainer_args_parse(&a, argc - 1, argv + 1, err, sizeof err);
    if (rc == 1) return 0;
    if (rc < 0) {
        fprintf(stderr, "ddptop-worker: %s\n", err);
        return 2;
    }
    /* ddptop validates the trainer options before it launches anything. */
    WorkerIdentity id;
    memset(&id, 0, sizeof id);
    if (getenv("DDPTOP_CHECK_ARGS")) {
        /* The check reads files and exits: it dies with the ddptop that
         * asked for it rather than outlive it. */
        pid_t asker = getppid();
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != asker) return 1;
        if (check_inputs(&a, err, sizeof err) ||
            pick_device(id.device, sizeof id.device, id.backend, sizeof id.backend, err, sizeof err) ||
            trainer_args_check_device(&a, id.device, id.backend, err, sizeof err)) {
            fprintf(stderr, "ddptop-worker: %s\n", err);
            return 2;
        }
        /* for ddptop's default -n: one rank per GPU when on GPUs */
        int gpus = 0;
        char gerr[160];
        if (!strcmp(id.device, "cuda") && gpu_count(&gpus, gerr, sizeof gerr)) gpus = 0;
        printf("device %s backend %s gpus %d\n", id.device, id.backend, gpus);
        return 0;
    }
    if (pick_device(id.device, sizeof id.device, id.backend, sizeof id.backend, err, sizeof err) ||
        trainer_args_check_device(&a, id.device, id.backend, err, sizeof err)) {
        fprintf(stderr, "ddptop-worker: %s\n", err);
        return 2;
    }
    int ping_s = 0;
    char ctl[512], tel[512], keys_path[4096];
    /* Where ddptop is and with which keys, before who this rank is: a
     * worker pointed at tcp:// without keys hears that first. */
    if (ping_timeout_s(&ping_s, err, sizeof err) ||
        identity_endpoints(NULL, NULL, ctl, sizeof ctl, tel, sizeof tel, keys_path, sizeof keys_path, err,
                           sizeof err) ||
        identity_from_env(NULL, NULL, &id, err, sizeof err) ||
        identity_gloo_host(NULL, NULL, id.master_addr, id.gloo_host, sizeof id.gloo_host, err, sizeof err)) {
        fprintf(stderr, "ddptop-worker: %s\n", err);
        return 2;
    }
    /* Keys only where ddptop demands them: its ipc:// sockets are plain. */
    JobKeys keys;
    bool curve = keys_path[0] && (!strncmp(ctl, "tcp://", 6) || !strncmp(tel, "tcp://", 6));
    if (curve && keys_read(keys_path, &keys, err, sizeof err)) {
        fprintf(stderr, "ddptop-worker: %s: %s\n", KEYS_ENV, err);
        return 2;
    }

    /* Several ranks share the cores: one BLAS thread each, or they fight. */
    openblas_set_num_threads(1);

    Uplink *up = NULL;
    if (uplink_open(&up, ctl, tel, id.rank, curve ? &keys : NULL, err, sizeof err)) {
        fprintf(stderr, "ddptop-worker rank %d: %s\n", id.rank, err);
        return 1;
    }
    uplink_set_ping_timeout(up, (int64_t)ping_s * 1000);
    /* Launched by ddptop (its parent-death signal set): tell its stop
     * (Ctrl-Z) from its death, and outlive it long enough to save. */
    uplink_watch_parent(up);
    int status = trainer_run(&a, &id, up);
    uplink_close(&up, 2000);
    return status;
}
