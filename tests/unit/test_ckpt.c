/* test_ckpt.c — checkpoints (workers/ckpt/ckpt.c): a round trip restores the
 * exact bytes and position; --keep-last prunes; every hostile or mismatched
 * file gets one line naming the problem and changes nothing; a writer
 * killed at a random moment never damages an earlier checkpoint or
 * `latest`. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "ckpt/ckpt.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "ckpt/safetensors.h"

static char g_tmp[256];

static void rm_rf(const char *path)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd)) {}
}

static int make_model(Mlp *m, const char *spec)
{
    int dims[MODEL_MAX_LINEAR + 1], nl;
    char err[256];
    if (mlp_parse(spec, dims, &nl, err, sizeof err) || mlp_init(m, dims, nl, 4, err, sizeof err)) {
        printf("  %s\n", err);
        return -1;
    }
    return 0;
}

static int make_optim(Optim *o, OptimKind kind, double momentum, size_t n)
{
    OptimConfig c;
    char err[256];
    optim_config_defaults(&c, kind);
    c.lr = 0.1;
    c.momentum = kind == OPTIM_SGD ? momentum : 0.0;
    return optim_init(o, &c, n, err, sizeof err);
}

static CkptMeta meta_for(int64_t step, int world)
{
    CkptMeta m;
    memset(&m, 0, sizeof m);
    m.step = step;
    m.epoch = step / 10;
    m.sampler_pos = (step % 10) * 16;
    m.samples = step * 16;
    m.seed = 1234567890123ull;
    m.world = world;
    snprintf(m.model_spec, sizeof m.model_spec, "mlp:20,16,3");
    snprintf(m.dataset, sizeof m.dataset, "synthetic");
    m.dataset_size = 1000;
    m.batch_size = 16;
    m.grad_accum = 2;
    m.shuffle = true;
    m.sched = (Schedule){ SCHED_COSINE, 0.1, 5, 100 };
    m.last_lr = 0.0123456789;
    m.precision = PREC_BF16;
    return m;
}

/* Distinct values per step, so a loaded checkpoint says which step it is. */
static void fill(Mlp *m, Optim *o, int64_t step)
{
    for (size_t i = 0; i < m->n_params; i++) {
        m->params[i] = (float)step + (float)i * 1e-3f;
        if (o->buf1) o->buf1[i] = -(float)step - (float)i * 1e-4f;
        if (o->buf2) o->buf2[i] = (float)step * 0.5f + (float)i;
    }
    o->has_buf = o->buf1 != NULL;
    o->t = step;
}

static int write_one(const char *dir, Mlp *m, Optim *o, int64_t step, int world, int keep, char *err, size_t errlen)
{
    CkptMeta meta = meta_for(step, world);
    char path[512];
    int64_t bytes = 0;
    fill(m, o, step);
    return ckpt_write(dir, &meta, m, o, keep, path, sizeof path, &bytes, err, errlen);
}

static void test_round_trip(void)
{
    TEST_BEGIN("round_trip_bytes_and_position");
    char dir[400], err[512], res[4096], note[256];
    snprintf(dir, sizeof dir, "%s/rt", g_tmp);
    Mlp m, m2;
    Optim o, o2;
    if (make_model(&m, "mlp:20,16,3") || make_model(&m2, "mlp:20,16,3") || make_optim(&o, OPTIM_SGD, 0.9, m.n_params) ||
        make_optim(&o2, OPTIM_SGD, 0.9, m.n_params)) {
        CHECK(0, "setup");
        TEST_END();
        return;
    }
    int rc = write_one(dir, &m, &o, 42, 2, 0, err, sizeof err);
    CHECK(rc == 0, "write: %s", err);
    CHECK(ckpt_resolve(dir, res, sizeof res, err, sizeof err) == 0, "resolve CKPT_DIR: %s", err);
    CHECK(strstr(res, "/step-00000042") != NULL, "CKPT_DIR resolves to %s", res);
    CkptMeta got;
    rc = ckpt_load(res, &m2, &o2, &got, 2, note, sizeof note, err, sizeof err);
    CHECK(rc == 0, "load: %s", err);
    CHECK(!memcmp(m.params, m2.params, m.n_params * sizeof(float)), "weights differ after the round trip");
    CHECK(!memcmp(o.buf1, o2.buf1, m.n_params * sizeof(float)), "momentum differs after the round trip");
    CHECK(o2.t == 42 && o2.has_buf, "optimizer steps %lld has_buf %d", (long long)o2.t, o2.has_buf);
    CkptMeta want = meta_for(42, 2);
    CHECK(got.step == 42 && got.epoch == want.epoch && got.sampler_pos == want.sampler_pos &&
              got.samples == want.samples && got.seed == want.seed && got.world == 2,
          "position: step %lld epoch %lld pos %lld samples %lld seed %llu", (long long)got.step, (long long)got.epoch,
          (long long)got.sampler_pos, (long long)got.samples, (unsigned long long)got.seed);
    CHECK(got.sched.kind == SCHED_COSINE && got.sched.warmup_steps == 5 && got.sched.total_steps == 100 &&
              got.sched.base_lr == 0.1 && got.last_lr == want.last_lr && got.grad_accum == 2,
          "schedule state lost");
    CHECK(got.precision == PREC_BF16, "precision %s after the round trip", precision_name(got.precision));
    CHECK(note[0] == 0, "unexpected note: %s", note);
    /* model.safetensors stays loadable as plain torch weights */
    Mlp m3;
    char mf[4200];
    snprintf(mf, sizeof mf, "%s/model.safetensors", res);
    CHECK(make_model(&m3, "mlp:20,16,3") == 0 && ckpt_load_model(mf, &m3, err, sizeof err) == 0, "%s", err);
    mlp_done(&m3);
    /* AdamW state too */
    Optim a, a2;
    CHECK(make_optim(&a, OPTIM_ADAMW, 0, m.n_params) == 0 && make_optim(&a2, OPTIM_ADAMW, 0, m.n_params) == 0, "adamw");
    snprintf(dir, sizeof dir, "%s/rt_adamw", g_tmp);
    CHECK(write_one(dir, &m, &a, 7, 1, 0, err, sizeof err) == 0, "%s", err);
    CHECK(ckpt_resolve(dir, res, sizeof res, err, sizeof err) == 0, "%s", err);
    CHECK(ckpt_load(res, &m2, &a2, &got, 1, NULL, 0, err, sizeof err) == 0, "%s", err);
    CHECK(!memcmp(a.buf1, a2.buf1, m.n_params * 4) && !memcmp(a.buf2, a2.buf2, m.n_params * 4) && a2.t == 7,
          "adamw state differs");
    optim_done(&a);
    optim_done(&a2);
    optim_done(&o);
    optim_done(&o2);
    mlp_done(&m);
    mlp_done(&m2);
    TEST_END();
}

static int count_steps(const char *dir, int64_t *steps, int max)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, "step-", 5) && n < max) steps[n++] = strtoll(e->d_name + 5, NULL, 10);
    if (d) closedir(d);
    return n;
}

static void test_keep_last(void)
{
    TEST_BEGIN("keep_last_prunes_oldest");
    char dir[400], err[512], link[64];
    snprintf(dir, sizeof dir, "%s/keep", g_tmp);
    Mlp m;
    Optim o;
    make_model(&m, "mlp:20,16,3");
    make_optim(&o, OPTIM_SGD, 0.9, m.n_params);
    for (int s = 1; s <= 5; s++) CHECK(write_one(dir, &m, &o, s * 10, 2, 2, err, sizeof err) == 0, "%s", err);
    int64_t st[16];
    int n = count_steps(dir, st, 16);
    int has40 = 0, has50 = 0;
    for (int i = 0; i < n; i++) has40 |= st[i] == 40, has50 |= st[i] == 50;
    CHECK(n == 2 && has40 && has50, "%d step dirs left (want 40 and 50)", n);
    char lp[500];
    snprintf(lp, sizeof lp, "%s/latest", dir);
    ssize_t k = readlink(lp, link, sizeof link - 1);
    link[k > 0 ? k : 0] = 0;
    CHECK(!strcmp(link, "step-00000050"), "latest -> %s", link);
    /* keep 0 keeps everything */
    snprintf(dir, sizeof dir, "%s/keepall", g_tmp);
    for (int s = 1; s <= 4; s++) write_one(dir, &m, &o, s, 2, 0, err, sizeof err);
    CHECK(count_steps(dir, st, 16) == 4, "keep-last 0 pruned");
    optim_done(&o);
    mlp_done(&m);
    TEST_END();
}

/* ---- hostile files ---- */

static char g_good[600]; /* a good step directory, copied for each case */

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[65536];
    size_t n;
    while (a && b && (n = fread(buf, 1, sizeof buf, a)) > 0) fwrite(buf, 1, n, b);
    if (a) fclose(a);
    if (b) fclose(b);
}

/* A fresh copy of the good checkpoint at dir. */
static void fresh_copy(const char *dir)
{
    char f[700], t[700];
    rm_rf(dir);
    mkdir(dir, 0755);
    const char *names[] = { "model.safetensors", "trainer.safetensors" };
    for (int i = 0; i < 2; i++) {
        snprintf(f, sizeof f, "%s/%s", g_good, names[i]);
        snprintf(t, sizeof t, "%s/%s", dir, names[i]);
        copy_file(f, t);
    }
}

/* Load dir into a model of `spec` with optimizer (kind, momentum) and
 * world; must fail with one line containing `want`, leaving the model's
 * weights untouched. */
static void expect_refused(const char *what, const char *dir, const char *spec, OptimKind kind, double mom, int world,
                           const char *want)
{
    Mlp m;
    Optim o;
    char err[512] = "";
    CkptMeta meta;
    if (make_model(&m, spec) || make_optim(&o, kind, mom, m.n_params)) {
        CHECK(0, "%s: setup", what);
        return;
    }
    for (size_t i = 0; i < m.n_params; i++) m.params[i] = -7.0f;
    int rc = ckpt_load(dir, &m, &o, &meta, world, NULL, 0, err, sizeof err);
    CHECK(rc == -1, "%s: accepted", what);
    CHECK(err[0] && !strchr(err, '\n'), "%s: error is not one line: \"%s\"", what, err);
    CHECK(strstr(err, want) != NULL, "%s: error \"%s\" does not say \"%s\"", what, err, want);
    bool untouched = true;
    for (size_t i = 0; i < m.n_params; i++) untouched &= m.params[i] == -7.0f;
    CHECK(untouched, "%s: weights changed by a refused checkpoint", what);
    printf("  refused %s: %s\n", what, err);
    optim_done(&o);
    mlp_done(&m);
}

static void truncate_to(const char *path, off_t len)
{
    if (truncate(path, len)) printf("  truncate %s: %s\n", path, strerror(errno));
}

static void flip_byte(const char *path, off_t from_end)
{
    int fd = open(path, O_RDWR);
    off_t end = lseek(fd, 0, SEEK_END);
    unsigned char c;
    if (pread(fd, &c, 1, end - from_end) == 1) {
        c ^= 0x40;
        if (pwrite(fd, &c, 1, end - from_end) != 1) printf("  pwrite failed\n");
    }
    close(fd);
}

/* Rewrite trainer.safetensors of dir with metadata key `key` set to val
 * (NULL: removed), tensors kept. */
static void edit_meta(const char *dir, const char *key, const char *val)
{
    static const char *keys[] = { "format",          "step",         "epoch",       "seed",        "world_size",
                                  "sampler_pos",     "samples",      "model",       "dataset",     "dataset_size",
                                  "batch_size",      "grad_accum",   "shuffle",     "drop_last",   "optimizer",
                                  "optimizer_steps", "momentum",     "dampening",   "nesterov",    "weight_decay",
                                  "beta1",           "beta2",        "eps",         "lr_schedule", "lr",
                                  "last_lr",         "warmup_steps", "total_steps", "model_crc32", "state_crc32" };
    char path[700], err[256];
    snprintf(path, sizeof path, "%s/trainer.safetensors", dir);
    StFile *f = NULL;
    if (st_open(path, &f, err, sizeof err)) {
        printf("  %s\n", err);
        return;
    }
    const char *kv[2 * 40 + 1];
    char vals[40][64];
    int n = 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = st_meta(f, keys[i]);
        if (!strcmp(keys[i], key)) v = val;
        if (!v) continue;
        snprintf(vals[i], sizeof vals[i], "%s", v);
        kv[n++] = keys[i];
        kv[n++] = vals[i];
    }
    kv[n] = NULL;
    StTensor t[64];
    int nt = st_count(f);
    for (int i = 0; i < nt && i < 64; i++) t[i] = *st_tensor(f, i);
    char tmp[720];
    snprintf(tmp, sizeof tmp, "%s.new", path);
    if (st_write(tmp, t, nt, kv, err, sizeof err)) printf("  %s\n", err);
    st_close(&f);
    rename(tmp, path);
}

static void test_hostile(void)
{
    TEST_BEGIN("hostile_checkpoints_refused_in_one_line");
    char dir[400], err[512], bad[500], f[600];
    snprintf(dir, sizeof dir, "%s/good", g_tmp);
    Mlp m;
    Optim o;
    make_model(&m, "mlp:20,16,3");
    make_optim(&o, OPTIM_SGD, 0.9, m.n_params);
    CHECK(write_one(dir, &m, &o, 30, 2, 0, err, sizeof err) == 0, "%s", err);
    CHECK(ckpt_resolve(dir, g_good, sizeof g_good, err, sizeof err) == 0, "%s", err);
    snprintf(bad, sizeof bad, "%s/bad", g_tmp);
    const char *S = "mlp:20,16,3";

    fresh_copy(bad);
    expect_refused("a good copy with the wrong world size", bad, S, OPTIM_SGD, 0.9, 4, "world size 2");
    expect_refused("another model shape", bad, "mlp:20,17,3", OPTIM_SGD, 0.9, 2, "shape");
    expect_refused("another model depth", bad, "mlp:20,16,16,3", OPTIM_SGD, 0.9, 2, "shape");
    expect_refused("fewer layers", bad, "mlp:20,3", OPTIM_SGD, 0.9, 2, "tensors");
    expect_refused("another optimizer", bad, S, OPTIM_ADAMW, 0, 2, "adamw");
    expect_refused("momentum state for a run without momentum", bad, S, OPTIM_SGD, 0.0, 2, "momentum");

    snprintf(f, sizeof f, "%s/model.safetensors", bad);
    struct stat st;
    stat(f, &st);
    const off_t cuts[] = { 0, 7, 9, 100, st.st_size / 2, st.st_size - 1 };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        fresh_copy(bad);
        truncate_to(f, cuts[i]);
        char what[64];
        snprintf(what, sizeof what, "model truncated to %lld bytes", (long long)cuts[i]);
        expect_refused(what, bad, S, OPTIM_SGD, 0.9, 2, "model.safetensors");
    }
    snprintf(f, sizeof f, "%s/trainer.safetensors", bad);
    stat(f, &st);
    fresh_copy(bad);
    truncate_to(f, st.st_size - 5);
    expect_refused("trainer state truncated", bad, S, OPTIM_SGD, 0.9, 2, "trainer.safetensors");
    fresh_copy(bad);
    unlink(f);
    expect_refused("trainer state missing", bad, S, OPTIM_SGD, 0.9, 2, "trainer.safetensors");

    fresh_copy(bad);
    snprintf(f, sizeof f, "%s/model.safetensors", bad);
    flip_byte(f, 3);
    expect_refused("a flipped bit in the weights", bad, S, OPTIM_SGD, 0.9, 2, "checksum");
    fresh_copy(bad);
    snprintf(f, sizeof f, "%s/trainer.safetensors", bad);
    flip_byte(f, 3);
    expect_refused("a flipped bit in the momentum", bad, S, OPTIM_SGD, 0.9, 2, "checksum");

    fresh_copy(bad);
    edit_meta(bad, "format", "something-else");
    expect_refused("an unknown trainer format", bad, S, OPTIM_SGD, 0.9, 2, "format");
    fresh_copy(bad);
    edit_meta(bad, "step", "12abc");
    expect_refused("a step that is not a number", bad, S, OPTIM_SGD, 0.9, 2, "\"step\"");
    fresh_copy(bad);
    edit_meta(bad, "sampler_pos", "-5");
    expect_refused("a negative sampler position", bad, S, OPTIM_SGD, 0.9, 2, "sampler_pos");
    fresh_copy(bad);
    edit_meta(bad, "epoch", NULL);
    expect_refused("a missing epoch", bad, S, OPTIM_SGD, 0.9, 2, "\"epoch\" missing");
    fresh_copy(bad);
    edit_meta(bad, "world_size", "0");
    expect_refused("world size 0", bad, S, OPTIM_SGD, 0.9, 0, "world_size");
    fresh_copy(bad);
    edit_meta(bad, "lr_schedule", "sawtooth");
    expect_refused("an unknown schedule", bad, S, OPTIM_SGD, 0.9, 2, "sawtooth");

    /* random garbage in place of the weights */
    fresh_copy(bad);
    snprintf(f, sizeof f, "%s/model.safetensors", bad);
    FILE *g = fopen(f, "wb");
    srand(7);
    for (int i = 0; i < 4096; i++) fputc(rand() & 0xff, g);
    fclose(g);
    expect_refused("random bytes as weights", bad, S, OPTIM_SGD, 0.9, 2, "model.safetensors");

    /* what --resume is given */
    char res[4096];
    snprintf(f, sizeof f, "%s/nope", g_tmp);
    CHECK(ckpt_resolve(f, res, sizeof res, err, sizeof err) == -1 && strstr(err, "No such file"), "missing: %s", err);
    snprintf(f, sizeof f, "%s/model.safetensors", bad);
    CHECK(ckpt_resolve(f, res, sizeof res, err, sizeof err) == -1 && strstr(err, "not a directory"), "file: %s", err);
    CHECK(ckpt_resolve(g_tmp, res, sizeof res, err, sizeof err) == -1 && strstr(err, "no latest"), "no ckpt: %s", err);
    optim_done(&o);
    mlp_done(&m);
    TEST_END();
}

/* ---- a writer killed at random moments ---- */

static void test_killed_writer(void)
{
    TEST_BEGIN("writer_killed_midway_leaves_latest_intact");
    char dir[400], err[512];
    snprintf(dir, sizeof dir, "%s/kill", g_tmp);
    /* ~8 MB of weights and as much momentum per checkpoint: a write takes
     * long enough for kills to land inside it. */
    const char *spec = "mlp:1000,1000,1000,10";
    Mlp m;
    Optim o;
    if (make_model(&m, spec) || make_optim(&o, OPTIM_SGD, 0.9, m.n_params)) {
        CHECK(0, "setup");
        TEST_END();
        return;
    }
    /* One checkpoint written in full first: the one that must survive. */
    CHECK(write_one(dir, &m, &o, 1, 2, 3, err, sizeof err) == 0, "%s", err);
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    int64_t next = 2;
    int kills = 0, partial = 0;
    for (int round = 0; round < 8; round++) {
        int64_t start = next;
        next += 1000;
        pid_t pid = fork();
        if (pid == 0) {
            for (int64_t s = start;; s++)
                if (write_one(dir, &m, &o, s, 2, 3, err, sizeof err)) _exit(3);
        }
        struct timespec ts = { 0, (long)(rand_r(&seed) % 120 + 1) * 1000000L };
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        kills += WIFSIGNALED(status);
        /* latest loads and holds the step it names; so does every step dir. */
        char res[4096];
        CkptMeta meta;
        Mlp m2;
        Optim o2;
        make_model(&m2, spec);
        make_optim(&o2, OPTIM_SGD, 0.9, m2.n_params);
        int rc = ckpt_resolve(dir, res, sizeof res, err, sizeof err);
        CHECK(rc == 0, "round %d: latest unusable: %s", round, err);
        if (rc == 0) {
            rc = ckpt_load(res, &m2, &o2, &meta, 2, NULL, 0, err, sizeof err);
            CHECK(rc == 0, "round %d: latest (%s) does not load: %s", round, res, err);
            CHECK(rc != 0 || m2.params[0] == (float)meta.step, "round %d: latest holds step %g, says %lld", round,
                  m2.params[0], (long long)meta.step);
        }
        DIR *d = opendir(dir);
        struct dirent *e;
        while (d && (e = readdir(d))) partial += !strncmp(e->d_name, ".tmp-step-", 10);
        if (d) closedir(d);
        int64_t st[64];
        int n = count_steps(dir, st, 64);
        for (int i = 0; i < n; i++) {
            char sd[600];
            snprintf(sd, sizeof sd, "%s/step-%08lld", dir, (long long)st[i]);
            rc = ckpt_load(sd, &m2, &o2, &meta, 2, NULL, 0, err, sizeof err);
            CHECK(rc == 0, "round %d: %s damaged: %s", round, sd, err);
        }
        optim_done(&o2);
        mlp_done(&m2);
    }
    printf("  8 writers killed; %d kill%s landed inside a write (a half-built .tmp directory was left)\n", partial,
           partial == 1 ? "" : "s");
    CHECK(kills == 8, "only %d of 8 writers were killed (a writer failed on its own?)", kills);
    optim_done(&o);
    mlp_done(&m);
    TEST_END();
}

int main(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/test_ckpt.XXXXXX");
    if (!mkdtemp(g_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip();
    test_keep_last();
    test_hostile();
    test_killed_writer();
    rm_rf(g_tmp);
    CHECK_EXIT();
}
