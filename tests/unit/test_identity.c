/* test_identity.c — a rank's identity from fake environments: torchrun's
 * names, Slurm's, which wins, Slurm hostlists and task counts, the
 * one-line errors naming the variable, ddptop's endpoints and key
 * requirement, and the address Gloo listens on. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "link/identity.h"

/* A fake environment: NULL-terminated "NAME=VALUE" strings. */
static const char *fake_get(void *ctx, const char *name)
{
    size_t n = strlen(name);
    for (const char **e = ctx; *e; e++)
        if (!strncmp(*e, name, n) && (*e)[n] == '=') return *e + n + 1;
    return NULL;
}

static int ident(const char **env, WorkerIdentity *id, char *err, size_t errlen)
{
    memset(id, 0, sizeof *id);
    err[0] = '\0';
    return identity_from_env(fake_get, (void *)env, id, err, errlen);
}

/* Expect a refusal whose message contains `want`. */
#define REFUSED(env, want)                                                           \
    do {                                                                             \
        WorkerIdentity id_;                                                          \
        char e_[512];                                                                \
        CHECK(ident(env, &id_, e_, sizeof e_) < 0, "accepted, wanted \"%s\"", want); \
        CHECK(strstr(e_, want) != NULL, "error \"%s\" lacks \"%s\"", e_, want);      \
        CHECK(!strchr(e_, '\n'), "error is not one line: %s", e_);                   \
    } while (0)

static void test_torchrun(void)
{
    WorkerIdentity id;
    char err[512];
    TEST_BEGIN("torchrun_names");
    const char *env[] = { "RANK=3",
                          "WORLD_SIZE=8",
                          "LOCAL_RANK=1",
                          "LOCAL_WORLD_SIZE=2",
                          "MASTER_ADDR=10.0.0.1",
                          "MASTER_PORT=29501",
                          "DDPTOP_JOB=job-7",
                          "DDPTOP_HOST=node-a",
                          NULL };
    CHECK(ident(env, &id, err, sizeof err) == 0, "%s", err);
    CHECK(id.rank == 3 && id.world == 8 && id.local_rank == 1 && id.local_world == 2, "%d/%d %d/%d", id.rank, id.world,
          id.local_rank, id.local_world);
    CHECK(!strcmp(id.master_addr, "10.0.0.1") && id.master_port == 29501, "%s:%d", id.master_addr, id.master_port);
    CHECK(!strcmp(id.job_id, "job-7") && !strcmp(id.host, "node-a"), "%s %s", id.job_id, id.host);
    TEST_END();

    TEST_BEGIN("torchrun_defaults");
    const char *env2[] = { "RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=", NULL };
    CHECK(ident(env2, &id, err, sizeof err) == 0, "%s", err);
    CHECK(id.local_rank == 1 && id.local_world == 2, "local %d/%d", id.local_rank, id.local_world);
    CHECK(!strcmp(id.master_addr, "127.0.0.1") && id.master_port == 29500, "%s:%d", id.master_addr, id.master_port);
    char h[128] = "";
    gethostname(h, sizeof h - 1);
    CHECK(!strcmp(id.job_id, "ddptop") && !strcmp(id.host, h), "job %s host %s (hostname %s)", id.job_id, id.host, h);
    TEST_END();
}

static void test_slurm(void)
{
    WorkerIdentity id;
    char err[512];
    TEST_BEGIN("slurm_names");
    const char *env[] = { "SLURM_PROCID=5",
                          "SLURM_NTASKS=8",
                          "SLURM_LOCALID=1",
                          "SLURM_TASKS_PER_NODE=4(x2)",
                          "SLURM_NODELIST=gpu[07-08]",
                          "SLURM_JOB_NODELIST=other",
                          NULL };
    CHECK(ident(env, &id, err, sizeof err) == 0, "%s", err);
    CHECK(id.rank == 5 && id.world == 8 && id.local_rank == 1 && id.local_world == 4, "%d/%d %d/%d", id.rank, id.world,
          id.local_rank, id.local_world);
    CHECK(!strcmp(id.master_addr, "gpu07"), "master %s", id.master_addr);
    TEST_END();

    TEST_BEGIN("slurm_local_world");
    /* this node's count when SLURM_NODEID says which; SLURM_NTASKS_PER_NODE first */
    const char *het[] = {
        "SLURM_PROCID=8", "SLURM_NTASKS=11", "SLURM_LOCALID=0", "SLURM_NODEID=2", "SLURM_TASKS_PER_NODE=4(x2),3", NULL
    };
    CHECK(ident(het, &id, err, sizeof err) == 0 && id.local_world == 3, "%s local world %d", err, id.local_world);
    const char *first[] = { "SLURM_PROCID=0", "SLURM_NTASKS=11", "SLURM_LOCALID=0", "SLURM_TASKS_PER_NODE=4(x2),3",
                            NULL };
    CHECK(ident(first, &id, err, sizeof err) == 0 && id.local_world == 4, "%s local world %d", err, id.local_world);
    const char *per[] = { "SLURM_PROCID=0",
                          "SLURM_NTASKS=8",
                          "SLURM_LOCALID=0",
                          "SLURM_NTASKS_PER_NODE=2",
                          "SLURM_TASKS_PER_NODE=4(x2)",
                          NULL };
    CHECK(ident(per, &id, err, sizeof err) == 0 && id.local_world == 2, "%s local world %d", err, id.local_world);
    TEST_END();

    TEST_BEGIN("slurm_master_addr");
    const char *job[] = { "SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_NODELIST=rack1-n[3-5]", NULL };
    CHECK(ident(job, &id, err, sizeof err) == 0 && !strcmp(id.master_addr, "rack1-n3"), "%s master %s", err,
          id.master_addr);
    const char *ma[] = { "SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_NODELIST=n[1-2]", "MASTER_ADDR=10.1.1.1", NULL };
    CHECK(ident(ma, &id, err, sizeof err) == 0 && !strcmp(id.master_addr, "10.1.1.1"), "%s master %s", err,
          id.master_addr);
    const char *none[] = { "SLURM_PROCID=1", "SLURM_NTASKS=2", NULL };
    CHECK(ident(none, &id, err, sizeof err) == 0 && !strcmp(id.master_addr, "127.0.0.1") && id.local_rank == 1 &&
              id.local_world == 2,
          "%s master %s local %d/%d", err, id.master_addr, id.local_rank, id.local_world);
    TEST_END();

    TEST_BEGIN("torchrun_wins_over_slurm");
    const char *both[] = { "RANK=2",
                           "WORLD_SIZE=4",
                           "SLURM_PROCID=0",
                           "SLURM_NTASKS=16",
                           "SLURM_LOCALID=0",
                           "SLURM_NODELIST=bad[",
                           "SLURM_TASKS_PER_NODE=8(x2)",
                           NULL };
    CHECK(ident(both, &id, err, sizeof err) == 0, "%s", err);
    CHECK(id.rank == 2 && id.world == 4 && id.local_rank == 2 && id.local_world == 4, "%d/%d %d/%d", id.rank, id.world,
          id.local_rank, id.local_world);
    CHECK(!strcmp(id.master_addr, "127.0.0.1"), "Slurm's nodelist leaked in: %s", id.master_addr);
    int w = -1;
    CHECK(identity_world(fake_get, (void *)both, &w, err, sizeof err) == 0 && w == 4, "world %d", w);
    const char *sl[] = { "SLURM_NTASKS=6", NULL }, *nothing[] = { NULL };
    CHECK(identity_world(fake_get, (void *)sl, &w, err, sizeof err) == 0 && w == 6, "slurm world %d", w);
    CHECK(identity_world(fake_get, (void *)nothing, &w, err, sizeof err) == 0 && w == 0, "no world %d", w);
    TEST_END();
}

static void test_hostlists(void)
{
    char out[128], err[256];
    static const char *ok[][2] = {
        { "node[01-04,07],gpu5", "node01" },
        { "a,b", "a" },
        { "rack1-n[3-5]", "rack1-n3" },
        { "solo", "solo" },
        { "gpu[007,009]", "gpu007" },
        { "n[1-2]-ib[3-4]", "n1-ib3" },
        { "x,y[1-3],z", "x" },
        { "h.example.org", "h.example.org" },
        { "c[10-12]", "c10" },
    };
    static const char *bad[] = { "",   "node[", "node[01-", "node[]",  "node[a-b]", "node[04-01]", "node]",
                                 ",a", "a,",    "a,,b",     "n[1[2]]", "n[1-]",     "has space",   "n[-3]" };
    TEST_BEGIN("hostlist_first");
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int rc = identity_hostlist_first(ok[i][0], out, sizeof out, err, sizeof err);
        CHECK(rc == 0 && !strcmp(out, ok[i][1]), "\"%s\" -> rc %d \"%s\" (want \"%s\") %s", ok[i][0], rc, rc ? "" : out,
              ok[i][1], rc ? err : "");
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(identity_hostlist_first(bad[i], out, sizeof out, err, sizeof err) < 0, "\"%s\" accepted as %s", bad[i],
              out);
    TEST_END();

    TEST_BEGIN("tasks_per_node");
    CHECK(identity_tasks_per_node("4(x2),3", -1) == 4, "first");
    CHECK(identity_tasks_per_node("4(x2),3", 1) == 4, "node 1");
    CHECK(identity_tasks_per_node("4(x2),3", 2) == 3, "node 2");
    CHECK(identity_tasks_per_node("4(x2),3", 9) == 4, "past the list takes the first");
    CHECK(identity_tasks_per_node("2", 0) == 2, "plain");
    static const char *tbad[] = { "", "x", "4(x", "4(x2", "4(2)", "4(x0)", "0", "4,", "4(x2)3", "4;3" };
    for (size_t i = 0; i < sizeof tbad / sizeof tbad[0]; i++)
        CHECK(identity_tasks_per_node(tbad[i], -1) < 0, "\"%s\" accepted", tbad[i]);
    TEST_END();
}

static void test_errors(void)
{
    TEST_BEGIN("errors_name_the_variable");
    const char *nothing[] = { "HOME=/root", NULL };
    REFUSED(nothing, "RANK and WORLD_SIZE are not set");
    const char *big[] = { "RANK=4", "WORLD_SIZE=4", NULL };
    REFUSED(big, "RANK=\"4\" is not an integer in [0, 3]");
    const char *word[] = { "RANK=0", "WORLD_SIZE=two", NULL };
    REFUSED(word, "WORLD_SIZE=\"two\"");
    const char *trail[] = { "RANK=0x1", "WORLD_SIZE=4", NULL };
    REFUSED(trail, "RANK=\"0x1\"");
    const char *half[] = { "RANK=0", NULL };
    REFUSED(half, "RANK is set but WORLD_SIZE is not");
    const char *half2[] = { "WORLD_SIZE=2", "SLURM_PROCID=0", "SLURM_NTASKS=2", NULL };
    REFUSED(half2, "WORLD_SIZE is set but RANK is not");
    const char *lr[] = { "RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2", NULL };
    REFUSED(lr, "LOCAL_RANK=\"2\"");
    const char *lw[] = { "RANK=0", "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=3", NULL };
    REFUSED(lw, "LOCAL_WORLD_SIZE=\"3\"");
    const char *port[] = { "RANK=0", "WORLD_SIZE=1", "MASTER_PORT=0", NULL };
    REFUSED(port, "MASTER_PORT=\"0\"");
    const char *srank[] = { "SLURM_PROCID=2", "SLURM_NTASKS=2", NULL };
    REFUSED(srank, "SLURM_PROCID=\"2\"");
    const char *shalf[] = { "SLURM_PROCID=0", NULL };
    REFUSED(shalf, "SLURM_PROCID is set but SLURM_NTASKS is not");
    const char *slist[] = { "SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_NODELIST=node[01-", NULL };
    REFUSED(slist, "SLURM_NODELIST=\"node[01-\" is not a Slurm hostlist");
    const char *sjlist[] = { "SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_NODELIST=,x", NULL };
    REFUSED(sjlist, "SLURM_JOB_NODELIST=");
    const char *stpn[] = { "SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_TASKS_PER_NODE=2(2)", NULL };
    REFUSED(stpn, "SLURM_TASKS_PER_NODE=\"2(2)\"");
    const char *sloc[] = { "SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_TASKS_PER_NODE=2(x2)", "SLURM_LOCALID=2", NULL };
    REFUSED(sloc, "SLURM_LOCALID=\"2\"");
    const char *snoloc[] = { "SLURM_PROCID=3", "SLURM_NTASKS=4", "SLURM_TASKS_PER_NODE=2(x2)", NULL };
    REFUSED(snoloc, "SLURM_LOCALID is not set");
    TEST_END();
}

static int endpoints(const char **env, char *ctl, char *tel, char *keys, char *err)
{
    ctl[0] = tel[0] = keys[0] = err[0] = '\0';
    return identity_endpoints(fake_get, (void *)env, ctl, 256, tel, 256, keys, 256, err, 512);
}

static void test_endpoints(void)
{
    char ctl[256], tel[256], keys[256], err[512];
    TEST_BEGIN("endpoints");
    const char *run[] = { "DDPTOP_CTL=ipc:///tmp/d/ctl", "DDPTOP_TEL=ipc:///tmp/d/tel",
                          "DDPTOP_CONNECT=tcp://10.0.0.1:5555", NULL };
    CHECK(endpoints(run, ctl, tel, keys, err) == 0, "%s", err);
    CHECK(!strcmp(ctl, "ipc:///tmp/d/ctl") && !strcmp(tel, "ipc:///tmp/d/tel") && !keys[0], "%s %s %s", ctl, tel, keys);
    const char *conn[] = { "DDPTOP_CONNECT=tcp://10.0.0.1:5555", "DDPTOP_KEYS=/k/job.keys", NULL };
    CHECK(endpoints(conn, ctl, tel, keys, err) == 0, "%s", err);
    CHECK(!strcmp(ctl, "tcp://10.0.0.1:5555") && !strcmp(tel, "tcp://10.0.0.1:5556") && !strcmp(keys, "/k/job.keys"),
          "%s %s %s", ctl, tel, keys);
    const char *ipc[] = { "DDPTOP_CONNECT=ipc:///tmp/d/ctl", NULL };
    CHECK(endpoints(ipc, ctl, tel, keys, err) == 0 && !strcmp(tel, "ipc:///tmp/d/tel"), "%s tel %s", err, tel);

    const char *nokey[] = { "DDPTOP_CONNECT=tcp://10.0.0.1:5555", NULL };
    CHECK(endpoints(nokey, ctl, tel, keys, err) < 0 &&
              !strcmp(err, "DDPTOP_CONNECT=tcp://10.0.0.1:5555 needs the job's key file: set DDPTOP_KEYS=FILE "
                           "(ddptop wrote it)"),
          "error: %s", err);
    const char *ctlkey[] = { "DDPTOP_CTL=tcp://127.0.0.1:7000", "DDPTOP_TEL=tcp://127.0.0.1:7001", NULL };
    CHECK(endpoints(ctlkey, ctl, tel, keys, err) < 0 && strstr(err, "DDPTOP_CTL=tcp://127.0.0.1:7000 needs"),
          "error: %s", err);
    const char *telkey[] = { "DDPTOP_CTL=ipc:///x/ctl", "DDPTOP_TEL=tcp://h:7001", NULL };
    CHECK(endpoints(telkey, ctl, tel, keys, err) < 0 && strstr(err, "DDPTOP_TEL=tcp://h:7001 needs"), "error: %s", err);
    const char *half[] = { "DDPTOP_CTL=ipc:///x/ctl", NULL };
    CHECK(endpoints(half, ctl, tel, keys, err) < 0 && strstr(err, "DDPTOP_TEL is not"), "error: %s", err);
    const char *bad[] = { "DDPTOP_CONNECT=http://h:1", NULL };
    CHECK(endpoints(bad, ctl, tel, keys, err) < 0 && strstr(err, "DDPTOP_CONNECT=http://h:1 is not"), "error: %s", err);
    const char *noport[] = { "DDPTOP_CONNECT=tcp://h", "DDPTOP_KEYS=/k", NULL };
    CHECK(endpoints(noport, ctl, tel, keys, err) < 0 && strstr(err, "DDPTOP_CONNECT=tcp://h is not"), "error: %s", err);
    const char *none[] = { NULL };
    CHECK(endpoints(none, ctl, tel, keys, err) < 0 && strstr(err, "DDPTOP_CONNECT is not set"), "error: %s", err);
    TEST_END();
}

/* The first IPv4 address of an interface that is up and not loopback. */
static int external_ipv4(char *out, size_t outlen)
{
    struct ifaddrs *all, *i;
    int rc = -1;
    if (getifaddrs(&all)) return -1;
    for (i = all; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
            (i->ifa_flags & IFF_LOOPBACK))
            continue;
        if (inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out, (socklen_t)outlen)) rc = 0;
        break;
    }
    freeifaddrs(all);
    return rc;
}

static int gloo(const char **env, const char *master, char *out, char *err)
{
    out[0] = err[0] = '\0';
    return identity_gloo_host(fake_get, (void *)env, master, out, 128, err, 512);
}

static void test_gloo_host(void)
{
    char out[128], err[512];
    const char *none[] = { NULL };
    TEST_BEGIN("gloo_host");
    const char *over[] = { "DDPTOP_GLOO_HOST=10.9.9.9", "GLOO_SOCKET_IFNAME=lo", NULL };
    CHECK(gloo(over, "10.0.0.1", out, err) == 0 && !strcmp(out, "10.9.9.9"), "%s %s", out, err);
    const char *ifn[] = { "GLOO_SOCKET_IFNAME=lo,eth0", NULL };
    CHECK(gloo(ifn, "10.0.0.1", out, err) == 0 && !strcmp(out, "127.0.0.1"), "lo: %s %s", out, err);
    const char *badif[] = { "GLOO_SOCKET_IFNAME=nosuch9", NULL };
    CHECK(gloo(badif, "10.0.0.1", out, err) < 0 && strstr(err, "GLOO_SOCKET_IFNAME=nosuch9"), "error: %s", err);
    CHECK(gloo(none, "", out, err) == 0 && !strcmp(out, "127.0.0.1"), "unset: %s %s", out, err);
    CHECK(gloo(none, "127.0.0.1", out, err) == 0 && !strcmp(out, "127.0.0.1"), "loopback: %s %s", out, err);
    CHECK(gloo(none, "localhost", out, err) == 0 && !strcmp(out, "127.0.0.1"), "localhost: %s %s", out, err);
    CHECK(gloo(none, "no-such-host.invalid", out, err) < 0 && strstr(err, "MASTER_ADDR=no-such-host.invalid"),
          "error: %s", err);
    char ext[64];
    if (external_ipv4(ext, sizeof ext) == 0) {
        /* towards an address of this host the kernel answers with that address */
        CHECK(gloo(none, ext, out, err) == 0 && !strcmp(out, ext), "own address %s -> %s %s", ext, out, err);
        /* a name for this host that resolves to loopback must not make Gloo
         * listen where no other host can reach it */
        char h[128] = "";
        struct addrinfo hints = { .ai_family = AF_INET }, *res = NULL;
        gethostname(h, sizeof h - 1);
        if (h[0] && getaddrinfo(h, NULL, &hints, &res) == 0) {
            if ((ntohl(((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr) >> 24) == 127)
                CHECK(gloo(none, h, out, err) == 0 && !strcmp(out, ext), "hostname %s -> %s %s (want %s)", h, out, err,
                      ext);
            freeaddrinfo(res);
        }
    }
    TEST_END();
}

int main(void)
{
    test_torchrun();
    test_slurm();
    test_hostlists();
    test_errors();
    test_endpoints();
    test_gloo_host();
    CHECK_EXIT();
}
