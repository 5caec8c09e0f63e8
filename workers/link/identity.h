/* identity.h — who this rank is and where its job lives, from the environment.
 *
 * Owns: reading the launcher's variables — torchrun's (RANK, WORLD_SIZE,
 * LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or, when RANK
 * and WORLD_SIZE are absent, Slurm's (SLURM_PROCID, SLURM_NTASKS,
 * SLURM_LOCALID, SLURM_NTASKS_PER_NODE / SLURM_TASKS_PER_NODE,
 * SLURM_NODELIST) — and ddptop's (DDPTOP_CTL, DDPTOP_TEL, DDPTOP_CONNECT,
 * DDPTOP_KEYS, DDPTOP_JOB, DDPTOP_HOST, DDPTOP_GLOO_HOST), the Slurm
 * hostlist syntax, and the choice of the address Gloo listens on.
 * Does not own: reading the key file or opening sockets (main.c, uplink.c).
 *
 * Every function reads variables through an IdentityGetenv, so tests feed
 * fake environments; NULL means the process's own (getenv). Errors are one
 * line naming the variable, for the worker to print and exit 2 on.
 * Main thread, once at start.
 */
#ifndef DDPTOP_IDENTITY_H
#define DDPTOP_IDENTITY_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    int rank, world, local_rank, local_world;
    int master_port;       /* MASTER_PORT, 29500 when unset (torchrun's default) */
    char master_addr[128]; /* MASTER_ADDR, else Slurm's first node, else 127.0.0.1 */
    char gloo_host[128];   /* address this rank's Gloo device listens on (identity_gloo_host) */
    char host[128];        /* the hello's host: DDPTOP_HOST, else gethostname() */
    char job_id[96];       /* store key prefix: unique per job (DDPTOP_JOB, else "ddptop") */
    char device[8];        /* "cpu" or "cuda" (resolved: never "auto") */
    char backend[8];       /* "gloo" or "nccl" */
} WorkerIdentity;

/* Returns the value of `name` or NULL when unset. */
typedef const char *(*IdentityGetenv)(void *ctx, const char *name);

/* Fill the rank fields, master_addr/port, job_id and host of *id (device,
 * backend and gloo_host untouched). torchrun's names when RANK or
 * WORLD_SIZE is set (then both must be), else Slurm's when SLURM_PROCID or
 * SLURM_NTASKS is set; the two are never mixed. LOCAL_RANK defaults to the
 * rank, LOCAL_WORLD_SIZE to the world. Refuses non-integers, rank >= world,
 * local rank >= local world, local world > world, a malformed hostlist.
 * Returns 0 or -1 with err. */
int identity_from_env(IdentityGetenv get, void *ctx, WorkerIdentity *id, char *err, size_t errlen);

/* The world size when the environment names one (WORLD_SIZE, else
 * SLURM_NTASKS), else 0 in *world. Returns 0 or -1 (not an integer). */
/* An integer variable in [lo, hi]; *out untouched when unset. Returns 1
 * set, 0 unset, -1 malformed (err names the variable and the range). */
int identity_env_int(IdentityGetenv get, void *ctx, const char *name, int lo, int hi, int *out, char *err,
                     size_t errlen);

int identity_world(IdentityGetenv get, void *ctx, int *world, char *err, size_t errlen);

/* ddptop's endpoints: DDPTOP_CTL and DDPTOP_TEL (what `ddptop run` sets;
 * both or neither), else DDPTOP_CONNECT=tcp://HOST:PORT or ipc://PATH with
 * tel beside it (keys_tel_endpoint). *keys_path gets DDPTOP_KEYS ("" when
 * unset); a tcp:// endpoint without it is refused, since ddptop only lets
 * the job's own key holders in there. Returns 0 or -1 with err. */
int identity_endpoints(IdentityGetenv get, void *ctx, char *ctl, size_t ctllen, char *tel, size_t tellen,
                       char *keys_path, size_t keyslen, char *err, size_t errlen);

/* Where this rank's Gloo device listens, reachable from the other hosts:
 * DDPTOP_GLOO_HOST if set; else the IPv4 address of the first interface in
 * GLOO_SOCKET_IFNAME (torch's variable, "eth0" or "eth0,eth1"); else
 * 127.0.0.1 when master_addr is empty or loopback; else the local address
 * the kernel would use to reach master_addr (no packet is sent) — and when
 * that is loopback (master_addr names this host through a loopback alias,
 * as /etc/hosts often does) the first non-loopback IPv4 address of an
 * interface that is up, so the other hosts can still reach this rank.
 * Returns 0 or -1 with err naming the variable that led there. */
int identity_gloo_host(IdentityGetenv get, void *ctx, const char *master_addr, char *out, size_t outlen, char *err,
                       size_t errlen);

/* The first host of a Slurm hostlist ("node[01-04,07],gpu5" -> "node01",
 * zero padding kept), checking the whole list's syntax. Returns 0 or -1
 * (malformed: err says where, without a variable name). */
int identity_hostlist_first(const char *list, char *out, size_t outlen, char *err, size_t errlen);

/* Tasks on this node from SLURM_TASKS_PER_NODE's syntax ("4(x2),3"): the
 * count of node `node` (0-based; a node past the list or node < 0 takes
 * the first). Returns the count, or -1 when malformed. */
int identity_tasks_per_node(const char *spec, int node);

#endif
