/* identity.c — a rank's identity and endpoints from the environment. See
 * identity.h.
 *
 * torchrun's names win over Slurm's, and the two are never mixed: a
 * LOCAL_RANK left over in a Slurm job's environment must not pair with
 * SLURM_NTASKS. The Gloo listen address is found by asking the kernel which
 * source address it would use towards MASTER_ADDR (a UDP connect sends
 * nothing), which is the address the other hosts reach this one by.
 */
#include "link/identity.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/curve.h"

#define DEFAULT_MASTER_PORT 29500
#define INT_MAX_ENV         (1 << 20)

static const char *env_get(IdentityGetenv get, void *ctx, const char *name)
{
    const char *s = get ? get(ctx, name) : getenv(name);
    return s && *s ? s : NULL; /* set but empty counts as unset, as before */
}

int identity_env_int(IdentityGetenv get, void *ctx, const char *name, int lo, int hi, int *out, char *err,
                     size_t errlen)
{
    const char *s = env_get(get, ctx, name);
    if (!s) return 0;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        snprintf(err, errlen, "%s=\"%s\" is not an integer in [%d, %d]", name, s, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 1;
}

int identity_world(IdentityGetenv get, void *ctx, int *world, char *err, size_t errlen)
{
    *world = 0;
    const char *name = env_get(get, ctx, "WORLD_SIZE") || env_get(get, ctx, "RANK") ? "WORLD_SIZE" : "SLURM_NTASKS";
    return identity_env_int(get, ctx, name, 1, INT_MAX_ENV, world, err, errlen) < 0 ? -1 : 0;
}

/* ---- Slurm syntax ---- */

static bool all_digits(const char *s, size_t n)
{
    if (!n) return false;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i])) return false;
    return true;
}

/* One range inside brackets, "07" or "01-04": its low bound as written
 * goes to *low (length *lowlen). Returns 0 or -1. */
static int check_range(const char *s, size_t n, const char **low, size_t *lowlen)
{
    const char *dash = memchr(s, '-', n);
    size_t a = dash ? (size_t)(dash - s) : n;
    if (!all_digits(s, a)) return -1;
    if (dash) {
        size_t b = n - a - 1;
        if (!all_digits(dash + 1, b) || strtoul(s, NULL, 10) > strtoul(dash + 1, NULL, 10)) return -1;
    }
    *low = s;
    *lowlen = a;
    return 0;
}

int identity_hostlist_first(const char *list, char *out, size_t outlen, char *err, size_t errlen)
{
    size_t o = 0;
    bool first = true, in_br = false, empty_host = true;
    const char *br = NULL;  /* start of the current bracket's contents */
    const char *low = NULL; /* first range's low bound in the bracket */
    size_t lowlen = 0;
    if (!list || !*list) {
        snprintf(err, errlen, "empty hostlist");
        return -1;
    }
    for (const char *p = list;; p++) {
        char c = *p;
        if (in_br) {
            if (c == '[' || c == '\0') break; /* nested or unclosed */
            if (c != ',' && c != ']') continue;
            const char *l;
            size_t ln;
            if (check_range(br, (size_t)(p - br), &l, &ln)) break;
            if (!low) {
                low = l;
                lowlen = ln;
            }
            br = p + 1;
            if (c == ']') {
                in_br = false;
                if (first) {
                    if (o + lowlen >= outlen) break;
                    memcpy(out + o, low, lowlen);
                    o += lowlen;
                }
            }
            continue;
        }
        if (c == '[') {
            in_br = true;
            empty_host = false;
            br = p + 1;
            low = NULL;
            continue;
        }
        if (c == ']') break;
        if (c == ',' || c == '\0') {
            if (empty_host) break;
            if (c == '\0') {
                out[o] = '\0';
                return 0;
            }
            first = false;
            empty_host = true;
            continue;
        }
        if (!isalnum((unsigned char)c) && !strchr("-_.", c)) break;
        empty_host = false;
        if (first) {
            if (o + 1 >= outlen) break;
            out[o++] = c;
        }
    }
    snprintf(err, errlen, "\"%s\" is not a Slurm hostlist (like node[01-04,07],gpu5)", list);
    return -1;
}

int identity_tasks_per_node(const char *spec, int node)
{
    /* "4(x2),3": counts, each optionally repeated. */
    int at = 0, first = -1;
    const char *p = spec;
    if (!p || !*p) return -1;
    for (;;) {
        char *end;
        if (!isdigit((unsigned char)*p)) return -1;
        long n = strtol(p, &end, 10);
        long rep = 1;
        p = end;
        if (*p == '(') {
            if (p[1] != 'x' || !isdigit((unsigned char)p[2])) return -1;
            rep = strtol(p + 2, &end, 10);
            if (*end != ')' || rep < 1) return -1;
            p = end + 1;
        }
        if (n < 1 || n > INT_MAX_ENV) return -1;
        if (first < 0) first = (int)n;
        if (node >= at && node < at + rep) {
            /* still check the rest of the syntax */
            for (const char *q = p; *q; q++)
                if (!isdigit((unsigned char)*q) && !strchr("(x),", *q)) return -1;
            return (int)n;
        }
        at += (int)(rep > INT_MAX_ENV ? INT_MAX_ENV : rep);
        if (*p == '\0') return first;
        if (*p != ',') return -1;
        p++;
    }
}

/* ---- identity ---- */

/* The rank and world size from two variables that come together (`how`
 * says how to set both); local rank and world default to them. */
static int global_ids(IdentityGetenv get, void *ctx, const char *rank_var, const char *world_var, const char *how,
                      WorkerIdentity *id, char *err, size_t errlen)
{
    const char *r = env_get(get, ctx, rank_var), *w = env_get(get, ctx, world_var);
    if (!r || !w) {
        snprintf(err, errlen, "%s is set but %s is not (%s)", r ? rank_var : world_var, r ? world_var : rank_var, how);
        return -1;
    }
    if (identity_env_int(get, ctx, world_var, 1, INT_MAX_ENV, &id->world, err, errlen) < 0 ||
        identity_env_int(get, ctx, rank_var, 0, id->world - 1, &id->rank, err, errlen) < 0)
        return -1;
    id->local_rank = id->rank;
    id->local_world = id->world;
    return 0;
}

static int torchrun_ids(IdentityGetenv get, void *ctx, WorkerIdentity *id, char *err, size_t errlen)
{
    if (global_ids(get, ctx, "RANK", "WORLD_SIZE", "set both, as torchrun does", id, err, errlen) ||
        identity_env_int(get, ctx, "LOCAL_WORLD_SIZE", 1, id->world, &id->local_world, err, errlen) < 0 ||
        identity_env_int(get, ctx, "LOCAL_RANK", 0, id->local_world - 1, &id->local_rank, err, errlen) < 0)
        return -1;
    return 0;
}

static int slurm_ids(IdentityGetenv get, void *ctx, WorkerIdentity *id, char *err, size_t errlen)
{
    if (global_ids(get, ctx, "SLURM_PROCID", "SLURM_NTASKS", "run the workers with srun", id, err, errlen)) return -1;
    int rc = identity_env_int(get, ctx, "SLURM_NTASKS_PER_NODE", 1, id->world, &id->local_world, err, errlen);
    if (rc < 0) return -1;
    const char *tpn = env_get(get, ctx, "SLURM_TASKS_PER_NODE");
    if (rc == 0 && tpn) {
        int node = -1;
        if (identity_env_int(get, ctx, "SLURM_NODEID", 0, INT_MAX_ENV, &node, err, errlen) < 0) return -1;
        int n = identity_tasks_per_node(tpn, node);
        if (n < 1) {
            snprintf(err, errlen, "SLURM_TASKS_PER_NODE=\"%s\" is not a task count list (like 4(x2),3)", tpn);
            return -1;
        }
        if (n > id->world) {
            snprintf(err, errlen, "SLURM_TASKS_PER_NODE=\"%s\": %d tasks on this node but SLURM_NTASKS=%d", tpn, n,
                     id->world);
            return -1;
        }
        id->local_world = n;
    }
    if (identity_env_int(get, ctx, "SLURM_LOCALID", 0, id->local_world - 1, &id->local_rank, err, errlen) < 0)
        return -1;
    if (id->local_rank >= id->local_world) { /* defaulted to the rank */
        snprintf(err, errlen, "SLURM_LOCALID is not set and SLURM_PROCID=%d is not below %d tasks per node", id->rank,
                 id->local_world);
        return -1;
    }
    return 0;
}

int identity_from_env(IdentityGetenv get, void *ctx, WorkerIdentity *id, char *err, size_t errlen)
{
    bool torchrun = env_get(get, ctx, "RANK") || env_get(get, ctx, "WORLD_SIZE");
    bool slurm = env_get(get, ctx, "SLURM_PROCID") || env_get(get, ctx, "SLURM_NTASKS");
    if (!torchrun && !slurm) {
        snprintf(err, errlen, "RANK and WORLD_SIZE are not set (start workers with ddptop run, torchrun or srun)");
        return -1;
    }
    if (torchrun ? torchrun_ids(get, ctx, id, err, errlen) : slurm_ids(get, ctx, id, err, errlen)) return -1;

    id->master_port = DEFAULT_MASTER_PORT;
    if (identity_env_int(get, ctx, "MASTER_PORT", 1, 65535, &id->master_port, err, errlen) < 0) return -1;
    const char *ma = env_get(get, ctx, "MASTER_ADDR");
    if (ma) {
        if (strlen(ma) >= sizeof id->master_addr) {
            snprintf(err, errlen, "MASTER_ADDR is longer than %zu characters", sizeof id->master_addr - 1);
            return -1;
        }
        snprintf(id->master_addr, sizeof id->master_addr, "%s", ma);
    } else if (!torchrun && (env_get(get, ctx, "SLURM_NODELIST") || env_get(get, ctx, "SLURM_JOB_NODELIST"))) {
        const char *name = env_get(get, ctx, "SLURM_NODELIST") ? "SLURM_NODELIST" : "SLURM_JOB_NODELIST";
        char e[384];
        if (identity_hostlist_first(env_get(get, ctx, name), id->master_addr, sizeof id->master_addr, e, sizeof e)) {
            snprintf(err, errlen, "%s=%s", name, e);
            return -1;
        }
    } else {
        snprintf(id->master_addr, sizeof id->master_addr, "127.0.0.1");
    }

    const char *job = env_get(get, ctx, "DDPTOP_JOB");
    if (job && strlen(job) >= sizeof id->job_id) {
        snprintf(err, errlen, "DDPTOP_JOB is longer than %zu characters", sizeof id->job_id - 1);
        return -1;
    }
    snprintf(id->job_id, sizeof id->job_id, "%s", job ? job : "ddptop");
    const char *host = env_get(get, ctx, "DDPTOP_HOST");
    if (host) {
        snprintf(id->host, sizeof id->host, "%s", host);
    } else {
        memset(id->host, 0, sizeof id->host);
        gethostname(id->host, sizeof id->host - 1);
    }
    return 0;
}

/* ---- endpoints ---- */

int identity_endpoints(IdentityGetenv get, void *ctx, char *ctl, size_t ctllen, char *tel, size_t tellen,
                       char *keys_path, size_t keyslen, char *err, size_t errlen)
{
    const char *c = env_get(get, ctx, "DDPTOP_CTL"), *t = env_get(get, ctx, "DDPTOP_TEL");
    const char *conn = env_get(get, ctx, "DDPTOP_CONNECT"), *keys = env_get(get, ctx, KEYS_ENV);
    const char *named; /* the variable a refusal names */
    if (c || t) {
        if (!c || !t) {
            snprintf(err, errlen, "%s is set but %s is not (ddptop run sets both)", c ? "DDPTOP_CTL" : "DDPTOP_TEL",
                     c ? "DDPTOP_TEL" : "DDPTOP_CTL");
            return -1;
        }
        if ((size_t)snprintf(ctl, ctllen, "%s", c) >= ctllen || (size_t)snprintf(tel, tellen, "%s", t) >= tellen) {
            snprintf(err, errlen, "DDPTOP_CTL or DDPTOP_TEL is too long");
            return -1;
        }
        named = strncmp(c, "tcp://", 6) ? "DDPTOP_TEL" : "DDPTOP_CTL";
    } else if (conn) {
        if ((strncmp(conn, "tcp://", 6) && strncmp(conn, "ipc://", 6)) ||
            (size_t)snprintf(ctl, ctllen, "%s", conn) >= ctllen || keys_tel_endpoint(conn, tel, tellen)) {
            snprintf(err, errlen, "DDPTOP_CONNECT=%s is not tcp://HOST:PORT or ipc://PATH", conn);
            return -1;
        }
        named = "DDPTOP_CONNECT";
        c = conn;
        t = tel;
    } else {
        snprintf(err, errlen,
                 "DDPTOP_CONNECT is not set (start workers with ddptop run, or point them at "
                 "ddptop: DDPTOP_CONNECT=tcp://HOST:PORT DDPTOP_KEYS=FILE)");
        return -1;
    }
    bool tcp = !strncmp(c, "tcp://", 6) || !strncmp(t, "tcp://", 6);
    if (tcp && !keys) {
        const char *v = !strcmp(named, "DDPTOP_CONNECT") ? conn : !strncmp(c, "tcp://", 6) ? c : t;
        snprintf(err, errlen, "%s=%s needs the job's key file: set %s=FILE (ddptop wrote it)", named, v, KEYS_ENV);
        return -1;
    }
    if ((size_t)snprintf(keys_path, keyslen, "%s", keys ? keys : "") >= keyslen) {
        snprintf(err, errlen, "%s is too long", KEYS_ENV);
        return -1;
    }
    return 0;
}

/* ---- Gloo listen address ---- */

static bool sa_is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return false;
}

static int sa_text(const struct sockaddr *sa, char *out, size_t outlen)
{
    const void *a = sa->sa_family == AF_INET ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
                                             : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
    return inet_ntop(sa->sa_family, a, out, (socklen_t)outlen) ? 0 : -1;
}

/* The IPv4 address of interface `ifname`, or with ifname NULL of the first
 * interface that is up and not loopback. Returns 0, 1 none, -1 error. */
static int iface_ipv4(const char *ifname, char *out, size_t outlen)
{
    struct ifaddrs *all;
    if (getifaddrs(&all)) return -1;
    int rc = 1;
    for (struct ifaddrs *i = all; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
        if (ifname ? strcmp(i->ifa_name, ifname) != 0
                   : !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK) || sa_is_loopback(i->ifa_addr))
            continue;
        rc = sa_text(i->ifa_addr, out, outlen);
        break;
    }
    freeifaddrs(all);
    return rc;
}

/* The source address the kernel picks towards host into *src. Returns 0 or
 * -1 with why. */
static int route_source(const char *host, struct sockaddr_storage *src, char *why, size_t whylen)
{
    struct addrinfo hints, *res;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    int g = getaddrinfo(host, "9", &hints, &res); /* any port: nothing is sent */
    if (g) {
        snprintf(why, whylen, "%s", gai_strerror(g));
        return -1;
    }
    int rc = -1;
    snprintf(why, whylen, "no route to it");
    for (struct addrinfo *a = res; a && rc; a = a->ai_next) {
        int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0) continue;
        socklen_t len = sizeof *src;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 && getsockname(fd, (struct sockaddr *)src, &len) == 0)
            rc = 0;
        else
            snprintf(why, whylen, "%s", strerror(errno));
        close(fd);
    }
    freeaddrinfo(res);
    return rc;
}

int identity_gloo_host(IdentityGetenv get, void *ctx, const char *master_addr, char *out, size_t outlen, char *err,
                       size_t errlen)
{
    const char *h = env_get(get, ctx, "DDPTOP_GLOO_HOST");
    if (h) {
        if ((size_t)snprintf(out, outlen, "%s", h) >= outlen) {
            snprintf(err, errlen, "DDPTOP_GLOO_HOST is too long");
            return -1;
        }
        return 0;
    }
    const char *ifs = env_get(get, ctx, "GLOO_SOCKET_IFNAME");
    if (ifs) {
        char name[IF_NAMESIZE + 1];
        size_t n = strcspn(ifs, ",");
        if (n == 0 || n >= sizeof name) {
            snprintf(err, errlen, "GLOO_SOCKET_IFNAME=%s: not an interface name", ifs);
            return -1;
        }
        memcpy(name, ifs, n);
        name[n] = '\0';
        int rc = iface_ipv4(name, out, outlen);
        if (rc) {
            snprintf(err, errlen, "GLOO_SOCKET_IFNAME=%s: %s", ifs,
                     rc < 0 ? strerror(errno) : "no interface of that name with an IPv4 address");
            return -1;
        }
        return 0;
    }
    if (!master_addr || !*master_addr || keys_host_is_loopback(master_addr)) {
        snprintf(out, outlen, "127.0.0.1");
        return 0;
    }
    char why[160], addr[64];
    struct sockaddr_storage src;
    if (route_source(master_addr, &src, why, sizeof why) || sa_text((struct sockaddr *)&src, addr, sizeof addr)) {
        snprintf(err, errlen,
                 "MASTER_ADDR=%s: cannot find the local address towards it (%s): set DDPTOP_GLOO_HOST "
                 "or GLOO_SOCKET_IFNAME",
                 master_addr, why);
        return -1;
    }
    /* MASTER_ADDR is this host under a loopback alias: listen where the
     * other hosts can reach it (a single-host job works either way). */
    if (sa_is_loopback((struct sockaddr *)&src) && iface_ipv4(NULL, addr, sizeof addr) != 0)
        snprintf(addr, sizeof addr, "127.0.0.1");
    if ((size_t)snprintf(out, outlen, "%s", addr) >= outlen) {
        snprintf(err, errlen, "MASTER_ADDR=%s: local address %s is too long", master_addr, addr);
        return -1;
    }
    return 0;
}
