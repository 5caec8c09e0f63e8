/* ckpt.c — writing checkpoint directories atomically, pruning them, reading
 * them back for --resume. See ckpt.h.
 *
 * Order matters for crash safety: files fsynced, temp dir fsynced, rename,
 * parent fsynced, then `latest` replaced by rename of a fresh symlink, and
 * only then is anything old removed (pruning renames a directory out of the
 * step-NNNNNNNN namespace before deleting it, so a half-deleted directory is
 * never mistaken for a checkpoint). Leftovers of a crashed writer
 * (.tmp-step-*-PID, .prune-*-PID with PID gone) are removed by the next
 * writer.
 */
#include "ckpt/ckpt.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <zlib.h>

#include "ckpt/safetensors.h"

#define TRAINER_FORMAT "ddptop-trainer-1"
#define MAX_STEP_DIRS  100000

static int fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static int mkdir_p(const char *dir, char *err, size_t errlen)
{
    char tmp[512];
    if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp) {
        snprintf(err, errlen, "checkpoint dir name too long: %s", dir);
        return -1;
    }
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) && errno != EEXIST) goto fail;
        *p = '/';
    }
    if (mkdir(tmp, 0755) && errno != EEXIST) goto fail;
    return 0;
fail:
    snprintf(err, errlen, "cannot create checkpoint dir %s: %s", tmp, strerror(errno));
    return -1;
}

static void rm_tree_flat(const char *dir)
{
    char p[700];
    const char *names[] = { "model.safetensors", "trainer.safetensors" };
    for (size_t i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

static int64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) ? 0 : (int64_t)st.st_size;
}

/* "step-NNNNNNNN" (8 or more digits) -> step, else -1. */
static int64_t step_of(const char *name)
{
    if (strncmp(name, "step-", 5)) return -1;
    const char *p = name + 5;
    size_t n = strlen(p);
    if (n < 8 || n > 18) return -1;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)p[i])) return -1;
    return strtoll(p, NULL, 10);
}

/* Leftovers of writers that died: ".tmp-step-...-PID" and ".prune-...-PID"
 * whose PID is no longer running. A live PID may be another job writing
 * into the same directory right now: its files are left alone. */
static void remove_stale(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[700];
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, ".tmp-step-", 10) && strncmp(e->d_name, ".prune-", 7)) continue;
        const char *dash = strrchr(e->d_name, '-');
        if (!dash || !dash[1]) continue;
        char *end;
        long pid = strtol(dash + 1, &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        rm_tree_flat(p);
    }
    closedir(d);
}

/* One step directory, as pruning orders them. */
typedef struct {
    int64_t step;
    struct timespec mtime;
} StepDir;

/* Oldest first: by when it was written, then by step. */
static int cmp_age(const void *a, const void *b)
{
    const StepDir *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return (x->step > y->step) - (x->step < y->step);
}

/* The step directories under dir into *out (malloc'd), at most
 * MAX_STEP_DIRS; returns how many (0 when dir cannot be read). */
static size_t list_steps(const char *dir, StepDir **out)
{
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d) return 0;
    StepDir *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < MAX_STEP_DIRS) {
        int64_t s = step_of(e->d_name);
        struct stat st;
        if (s < 0 || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISDIR(st.st_mode)) continue;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 64;
            StepDir *nv = realloc(v, nc * sizeof *nv);
            if (!nv) break;
            v = nv;
            cap = nc;
        }
        v[n++] = (StepDir){ s, st.st_mtim };
    }
    closedir(d);
    *out = v;
    return n;
}

/* Keep the keep_last most recently written step directories (and always
 * `current`). By age, not by step number: a new run in a directory that
 * holds an older run's higher steps keeps its own. */
static void prune(const char *dir, int keep_last, int64_t current)
{
    if (keep_last <= 0) return;
    StepDir *v;
    size_t n = list_steps(dir, &v);
    if (n > (size_t)keep_last) {
        qsort(v, n, sizeof *v, cmp_age);
        char from[700], to[700];
        for (size_t i = 0; i + (size_t)keep_last < n; i++) {
            if (v[i].step == current) continue;
            snprintf(from, sizeof from, "%s/step-%08" PRId64, dir, v[i].step);
            snprintf(to, sizeof to, "%s/.prune-step-%08" PRId64 "-%d", dir, v[i].step, (int)getpid());
            /* Out of the namespace first: a crash mid-delete leaves a hidden
             * directory, never a step directory with one file missing. */
            if (rename(from, to) == 0) rm_tree_flat(to);
        }
        fsync_path(dir);
    }
    free(v);
}

int ckpt_count(const char *dir, int64_t *newest_step)
{
    StepDir *v;
    size_t n = list_steps(dir, &v);
    int64_t top = -1;
    for (size_t i = 0; i < n; i++)
        if (v[i].step > top) top = v[i].step;
    free(v);
    if (newest_step) *newest_step = top;
    return (int)n;
}

int ckpt_check_dir(const char *dir, char *err, size_t errlen)
{
    char at[512];
    if (!dir[0] || snprintf(at, sizeof at, "%s", dir) >= (int)sizeof at) {
        snprintf(err, errlen, "--ckpt-dir: empty or too long");
        return -1;
    }
    /* the directory, or the nearest parent that exists (ckpt_write makes the rest) */
    struct stat st;
    while (stat(at, &st)) {
        if (errno != ENOENT) {
            snprintf(err, errlen, "--ckpt-dir %s: %s", dir, strerror(errno));
            return -1;
        }
        char *slash = strrchr(at, '/');
        if (!slash)
            snprintf(at, sizeof at, ".");
        else if (slash == at)
            at[1] = 0;
        else
            *slash = 0;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "--ckpt-dir %s: %s is not a directory", dir, at);
        return -1;
    }
    struct statfs sf;
    if (statfs(at, &sf) == 0 && (sf.f_type == PROC_SUPER_MAGIC || sf.f_type == SYSFS_MAGIC)) {
        snprintf(err, errlen, "--ckpt-dir %s: %s is a kernel file system (/proc, /sys): choose a real directory", dir,
                 at);
        return -1;
    }
    /* what a checkpoint does first: make a directory there */
    char probe[600];
    snprintf(probe, sizeof probe, "%s/.ddptop-probe-XXXXXX", at);
    if (!mkdtemp(probe)) {
        snprintf(err, errlen, "--ckpt-dir %s: cannot write in %s (%s)", dir, at, strerror(errno));
        return -1;
    }
    rmdir(probe);
    return 0;
}

/* CRC-32 over the data of tensors t[0..n), in that order. */
static uint32_t crc_tensors(const StTensor *t, int n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    for (int i = 0; i < n; i++) {
        const unsigned char *p = t[i].data;
        size_t left = t[i].nbytes;
        while (left) {
            uInt k = left > (1u << 30) ? (1u << 30) : (uInt)left;
            c = crc32(c, p, k);
            p += k;
            left -= k;
        }
    }
    return (uint32_t)c;
}

static void fill_tensor(StTensor *x, const char *name, const ModelTensor *mt, const float *data)
{
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    snprintf(x->dtype, sizeof x->dtype, "F32");
    x->ndim = mt->ndim;
    for (int d = 0; d < mt->ndim; d++) x->shape[d] = mt->shape[d];
    x->data = data + mt->offset;
    x->nbytes = mt->numel * sizeof(float);
}

/* The optimizer buffers a checkpoint holds for o: names and data. */
static int optim_buffers(const Optim *o, const char **what, const float **buf)
{
    if (o->cfg.kind == OPTIM_ADAMW) {
        what[0] = "exp_avg";
        buf[0] = o->buf1;
        what[1] = "exp_avg_sq";
        buf[1] = o->buf2;
        return 2;
    }
    if (o->buf1 && o->has_buf) {
        what[0] = "momentum_buffer";
        buf[0] = o->buf1;
        return 1;
    }
    return 0;
}

int ckpt_write(const char *dir, const CkptMeta *meta, const Mlp *m, const Optim *o, int keep_last, char *path_out,
               size_t path_len, int64_t *bytes, char *err, size_t errlen)
{
    char tmpdir[600], final[600], file[640];
    if (mkdir_p(dir, err, errlen)) return -1;
    remove_stale(dir);
    snprintf(final, sizeof final, "%s/step-%08" PRId64, dir, meta->step);
    snprintf(tmpdir, sizeof tmpdir, "%s/.tmp-step-%08" PRId64 "-%d", dir, meta->step, (int)getpid());
    rm_tree_flat(tmpdir); /* leftovers of a crashed attempt with our pid */
    if (mkdir(tmpdir, 0755)) {
        snprintf(err, errlen, "cannot create %s: %s", tmpdir, strerror(errno));
        return -1;
    }

    /* model.safetensors: PyTorch state_dict names and shapes, metadata
     * exactly {"format": "pt"} as torch's save_file writes it. */
    StTensor t[2 * MODEL_MAX_LINEAR];
    for (int i = 0; i < m->n_tensors; i++) fill_tensor(&t[i], m->tensors[i].name, &m->tensors[i], m->params);
    const char *model_meta[] = { "format", "pt", NULL };
    snprintf(file, sizeof file, "%s/model.safetensors", tmpdir);
    if (st_write(file, t, m->n_tensors, model_meta, err, errlen)) goto fail;

    /* trainer.safetensors: optimizer state, named after the parameters. */
    StTensor ot[2 * 2 * MODEL_MAX_LINEAR];
    const char *what[2];
    const float *buf[2];
    int nb = optim_buffers(o, what, buf), n = 0;
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < m->n_tensors; i++) {
            char name[128];
            snprintf(name, sizeof name, "state.%s.%s", m->tensors[i].name, what[b]);
            fill_tensor(&ot[n++], name, &m->tensors[i], buf[b]);
        }
    const OptimConfig *oc = &o->cfg;
    char v[24][40];
    int k = 0;
#define PUT(fmt, val) snprintf(v[k++], sizeof v[0], fmt, val)
    PUT("%" PRId64, meta->step); /* 0 */
    PUT("%" PRId64, meta->epoch);
    PUT("%" PRIu64, meta->seed);
    PUT("%d", meta->world);
    PUT("%" PRId64, meta->sampler_pos);
    PUT("%" PRId64, meta->samples); /* 5 */
    PUT("%" PRId64, o->t);
    PUT("%.17g", meta->sched.base_lr);
    PUT("%.17g", meta->last_lr);
    PUT("%" PRId64, meta->sched.warmup_steps);
    PUT("%" PRId64, meta->sched.total_steps); /* 10 */
    PUT("%" PRId64, meta->dataset_size);
    PUT("%" PRId64, meta->batch_size);
    PUT("%" PRId64, meta->grad_accum);
    PUT("%.17g", oc->momentum);
    PUT("%.17g", oc->dampening); /* 15 */
    PUT("%.17g", oc->weight_decay);
    PUT("%.17g", oc->beta1);
    PUT("%.17g", oc->beta2);
    PUT("%.17g", oc->eps);
    PUT("%08" PRIx32, crc_tensors(t, m->n_tensors)); /* 20 */
    PUT("%08" PRIx32, crc_tensors(ot, n));
#undef PUT
    const char *tmeta[] = { "format",
                            TRAINER_FORMAT,
                            "step",
                            v[0],
                            "epoch",
                            v[1],
                            "seed",
                            v[2],
                            "world_size",
                            v[3],
                            "sampler_pos",
                            v[4],
                            "samples",
                            v[5],
                            "model",
                            meta->model_spec,
                            "dataset",
                            meta->dataset,
                            "dataset_size",
                            v[11],
                            "batch_size",
                            v[12],
                            "grad_accum",
                            v[13],
                            "shuffle",
                            meta->shuffle ? "true" : "false",
                            "drop_last",
                            meta->drop_last ? "true" : "false",
                            "optimizer",
                            oc->kind == OPTIM_ADAMW ? "adamw" : "sgd",
                            "optimizer_steps",
                            v[6],
                            "momentum",
                            v[14],
                            "dampening",
                            v[15],
                            "nesterov",
                            oc->nesterov ? "true" : "false",
                            "weight_decay",
                            v[16],
                            "beta1",
                            v[17],
                            "beta2",
                            v[18],
                            "eps",
                            v[19],
                            "lr_schedule",
                            schedule_kind_name(meta->sched.kind),
                            "lr",
                            v[7],
                            "last_lr",
                            v[8],
                            "warmup_steps",
                            v[9],
                            "total_steps",
                            v[10],
                            "model_crc32",
                            v[20],
                            "state_crc32",
                            v[21],
                            "precision",
                            precision_name(meta->precision),
                            NULL };
    snprintf(file, sizeof file, "%s/trainer.safetensors", tmpdir);
    if (st_write(file, ot, n, tmeta, err, errlen)) goto fail;

    if (fsync_path(tmpdir)) {
        snprintf(err, errlen, "fsync %s: %s", tmpdir, strerror(errno));
        goto fail;
    }
    struct stat st;
    if (stat(final, &st) == 0) {
        /* The same step twice: another run's (a new run in an old run's
         * directory) or a resumed run writing a step an earlier run wrote.
         * This run's replaces it, in one swap, so latest never points at
         * another run's weights; where the file system cannot swap, the
         * first stays. */
        if (renameat2(AT_FDCWD, tmpdir, AT_FDCWD, final, RENAME_EXCHANGE) == 0) {
            char old[640];
            snprintf(old, sizeof old, "%s/.prune-step-%08" PRId64 "-%d", dir, meta->step, (int)getpid());
            if (rename(tmpdir, old) == 0) rm_tree_flat(old);
        } else {
            rm_tree_flat(tmpdir);
        }
    } else if (rename(tmpdir, final)) {
        snprintf(err, errlen, "rename %s -> %s: %s", tmpdir, final, strerror(errno));
        goto fail;
    }
    fsync_path(dir);

    /* latest -> step-NNNNNNNN, swapped atomically. */
    char link_tmp[640], link_final[640], target[64];
    snprintf(target, sizeof target, "step-%08" PRId64, meta->step);
    snprintf(link_tmp, sizeof link_tmp, "%s/.latest-%d", dir, (int)getpid());
    snprintf(link_final, sizeof link_final, "%s/latest", dir);
    unlink(link_tmp);
    if (symlink(target, link_tmp) || rename(link_tmp, link_final)) {
        snprintf(err, errlen, "cannot update %s: %s", link_final, strerror(errno));
        unlink(link_tmp);
        return -1;
    }
    fsync_path(dir);
    prune(dir, keep_last, meta->step);

    snprintf(path_out, path_len, "%s", final);
    char f1[700], f2[700];
    snprintf(f1, sizeof f1, "%s/model.safetensors", final);
    snprintf(f2, sizeof f2, "%s/trainer.safetensors", final);
    if (bytes) *bytes = file_size(f1) + file_size(f2);
    return 0;
fail:
    rm_tree_flat(tmpdir);
    return -1;
}

/* ---- reading ---- */

/* Check t against the model tensor mt (dtype F32, same shape). */
static int check_tensor(const char *file, const char *name, const StTensor *t, const ModelTensor *mt, char *err,
                        size_t errlen)
{
    if (!t) {
        snprintf(err, errlen, "%s: tensor \"%s\" missing", file, name);
        return -1;
    }
    if (strcmp(t->dtype, "F32")) {
        snprintf(err, errlen, "%s: tensor \"%s\" is %s, expected F32", file, name, t->dtype);
        return -1;
    }
    bool same = t->ndim == mt->ndim;
    for (int d = 0; same && d < mt->ndim; d++) same = t->shape[d] == mt->shape[d];
    if (!same) {
        char got[64] = "", want[64] = "";
        for (int d = 0; d < t->ndim && d < 8; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%" PRId64, d ? "," : "", t->shape[d]);
        for (int d = 0; d < mt->ndim; d++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%" PRId64, d ? "," : "", mt->shape[d]);
        snprintf(err, errlen, "%s: tensor \"%s\" has shape [%s], the model expects [%s]", file, name, got, want);
        return -1;
    }
    return 0;
}

/* Every tensor of m in f, by name, with m's shape, and nothing else. */
static int check_model(const char *file, StFile *f, const Mlp *m, char *err, size_t errlen)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (check_tensor(file, m->tensors[i].name, st_find(f, m->tensors[i].name), &m->tensors[i], err, errlen))
            return -1;
    if (st_count(f) != m->n_tensors) {
        snprintf(err, errlen, "%s: has %d tensors, the model expects %d", file, st_count(f), m->n_tensors);
        return -1;
    }
    return 0;
}

int ckpt_load_model(const char *file, Mlp *m, char *err, size_t errlen)
{
    StFile *f = NULL;
    if (st_open(file, &f, err, errlen)) return -1;
    int rc = -1;
    if (check_model(file, f, m, err, errlen)) goto out;
    for (int i = 0; i < m->n_tensors; i++) {
        const ModelTensor *mt = &m->tensors[i];
        memcpy(m->params + mt->offset, st_find(f, mt->name)->data, mt->numel * sizeof(float));
    }
    rc = 0;
out:
    st_close(&f);
    return rc;
}

int ckpt_resolve(const char *path, char *out, size_t outlen, char *err, size_t errlen)
{
    char p[PATH_MAX + 32], probe[PATH_MAX + 64];
    struct stat st;
    if (stat(path, &st)) {
        snprintf(err, errlen, "--resume %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "--resume %s: not a directory (expected CKPT_DIR/step-NNNNNNNN or CKPT_DIR/latest)",
                 path);
        return -1;
    }
    snprintf(p, sizeof p, "%s", path);
    snprintf(probe, sizeof probe, "%s/model.safetensors", p);
    if (access(probe, F_OK)) {
        /* CKPT_DIR itself: follow its latest. */
        snprintf(probe, sizeof probe, "%s/latest", p);
        if (stat(probe, &st) || !S_ISDIR(st.st_mode)) {
            snprintf(err, errlen, "--resume %s: no model.safetensors in it, and no latest checkpoint", path);
            return -1;
        }
        memcpy(p, probe, sizeof p - 1);
        p[sizeof p - 1] = 0;
    }
    char real[PATH_MAX];
    if (!realpath(p, real)) {
        snprintf(err, errlen, "--resume %s: %s", p, strerror(errno));
        return -1;
    }
    if (strlen(real) >= outlen) {
        snprintf(err, errlen, "--resume %s: path too long", real);
        return -1;
    }
    snprintf(out, outlen, "%s", real);
    return 0;
}

/* Metadata readers: a missing or malformed value is an error naming it. */
static const char *meta_str(StFile *f, const char *file, const char *key, char *err, size_t errlen)
{
    const char *s = st_meta(f, key);
    if (!s) snprintf(err, errlen, "%s: metadata \"%s\" missing", file, key);
    return s;
}

static int meta_i64(StFile *f, const char *file, const char *key, int64_t lo, int64_t hi, int64_t *out, char *err,
                    size_t errlen)
{
    const char *s = meta_str(f, file, key, err, errlen);
    if (!s) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        snprintf(err, errlen, "%s: metadata \"%s\" = \"%.40s\" is not an integer in [%" PRId64 ", %" PRId64 "]", file,
                 key, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int meta_f64(StFile *f, const char *file, const char *key, double *out, char *err, size_t errlen)
{
    const char *s = meta_str(f, file, key, err, errlen);
    if (!s) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) {
        snprintf(err, errlen, "%s: metadata \"%s\" = \"%.40s\" is not a number", file, key, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int meta_bool(StFile *f, const char *file, const char *key, bool *out, char *err, size_t errlen)
{
    const char *s = meta_str(f, file, key, err, errlen);
    if (!s) return -1;
    if (!strcmp(s, "true"))
        *out = true;
    else if (!strcmp(s, "false"))
        *out = false;
    else {
        snprintf(err, errlen, "%s: metadata \"%s\" = \"%.40s\" is not true/false", file, key, s);
        return -1;
    }
    return 0;
}

static void note_add(char *note, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note_add(char *note, size_t len, const char *fmt, ...)
{
    if (!note || !len) return;
    size_t at = strlen(note);
    if (at + 3 >= len) return;
    if (at) {
        snprintf(note + at, len - at, "; ");
        at += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note + at, len - at, fmt, ap);
    va_end(ap);
}

static bool differ(double a, double b) { return !(a == b); }

int ckpt_load(const char *dir, Mlp *m, Optim *o, CkptMeta *meta, int world, char *note, size_t notelen, char *err,
              size_t errlen)
{
    char mfile[PATH_MAX + 32], tfile[PATH_MAX + 32];
    snprintf(mfile, sizeof mfile, "%s/model.safetensors", dir);
    snprintf(tfile, sizeof tfile, "%s/trainer.safetensors", dir);
    if (note && notelen) note[0] = 0;
    StFile *mf = NULL, *tf = NULL;
    int rc = -1;
    if (st_open(mfile, &mf, err, errlen) || st_open(tfile, &tf, err, errlen)) goto out;

    /* The position and the job it belongs to. */
    const char *fmt = meta_str(tf, tfile, "format", err, errlen);
    if (!fmt) goto out;
    if (strcmp(fmt, TRAINER_FORMAT)) {
        snprintf(err, errlen, "%s: format \"%.40s\", this build reads \"%s\"", tfile, fmt, TRAINER_FORMAT);
        goto out;
    }
    CkptMeta c;
    memset(&c, 0, sizeof c);
    int64_t w, seed, ostep;
    const char *s;
    if (meta_i64(tf, tfile, "step", 0, INT64_MAX / 2, &c.step, err, errlen) ||
        meta_i64(tf, tfile, "epoch", 0, INT64_MAX / 2, &c.epoch, err, errlen) ||
        meta_i64(tf, tfile, "sampler_pos", 0, INT64_MAX / 2, &c.sampler_pos, err, errlen) ||
        meta_i64(tf, tfile, "samples", 0, INT64_MAX / 2, &c.samples, err, errlen) ||
        meta_i64(tf, tfile, "seed", 0, INT64_MAX, &seed, err, errlen) ||
        meta_i64(tf, tfile, "world_size", 1, 1 << 20, &w, err, errlen) ||
        meta_i64(tf, tfile, "dataset_size", 0, INT64_MAX / 2, &c.dataset_size, err, errlen) ||
        meta_i64(tf, tfile, "batch_size", 1, INT64_MAX / 2, &c.batch_size, err, errlen) ||
        meta_i64(tf, tfile, "grad_accum", 1, INT64_MAX / 2, &c.grad_accum, err, errlen) ||
        meta_i64(tf, tfile, "optimizer_steps", 0, INT64_MAX / 2, &ostep, err, errlen) ||
        meta_i64(tf, tfile, "warmup_steps", 0, INT64_MAX / 2, &c.sched.warmup_steps, err, errlen) ||
        meta_i64(tf, tfile, "total_steps", 0, INT64_MAX / 2, &c.sched.total_steps, err, errlen) ||
        meta_f64(tf, tfile, "lr", &c.sched.base_lr, err, errlen) ||
        meta_f64(tf, tfile, "last_lr", &c.last_lr, err, errlen) ||
        meta_bool(tf, tfile, "shuffle", &c.shuffle, err, errlen) ||
        meta_bool(tf, tfile, "drop_last", &c.drop_last, err, errlen))
        goto out;
    c.seed = (uint64_t)seed;
    c.world = (int)w;
    if (!(s = meta_str(tf, tfile, "lr_schedule", err, errlen))) goto out;
    if (schedule_kind_parse(s, &c.sched.kind)) {
        snprintf(err, errlen, "%s: unknown lr_schedule \"%.40s\"", tfile, s);
        goto out;
    }
    if (!(s = meta_str(tf, tfile, "model", err, errlen))) goto out;
    snprintf(c.model_spec, sizeof c.model_spec, "%s", s);
    if (!(s = meta_str(tf, tfile, "dataset", err, errlen))) goto out;
    snprintf(c.dataset, sizeof c.dataset, "%s", s);
    /* Checkpoints from before --precision were all trained in FP32. */
    if ((s = st_meta(tf, "precision")) && precision_parse(s, &c.precision)) {
        snprintf(err, errlen, "%s: unknown precision \"%.20s\" (fp32, tf32, bf16)", tfile, s);
        goto out;
    }
    if (world > 0 && c.world != world) {
        snprintf(err, errlen, "%s: saved by a job of world size %d, this job has %d (resume with -n %d)", dir, c.world,
                 world, c.world);
        goto out;
    }

    /* The model: names, shapes, and the bytes the writer checksummed. */
    if (check_model(mfile, mf, m, err, errlen)) goto out;
    StTensor mt[2 * MODEL_MAX_LINEAR];
    for (int i = 0; i < m->n_tensors; i++) mt[i] = *st_find(mf, m->tensors[i].name);
    if (!(s = meta_str(tf, tfile, "model_crc32", err, errlen))) goto out;
    char crc[16];
    snprintf(crc, sizeof crc, "%08" PRIx32, crc_tensors(mt, m->n_tensors));
    if (strcmp(crc, s)) {
        snprintf(err, errlen, "%s: tensor data does not match the checksum saved with it (corrupt or modified)", mfile);
        goto out;
    }

    /* The optimizer: the same kind, and state buffers where this run keeps them. */
    if (!(s = meta_str(tf, tfile, "optimizer", err, errlen))) goto out;
    const char *want = o->cfg.kind == OPTIM_ADAMW ? "adamw" : "sgd";
    if (strcmp(s, want)) {
        snprintf(err, errlen, "%s: saved with optimizer %.20s, this run uses --optimizer %s", dir, s, want);
        goto out;
    }
    const char *names[2] = { NULL, NULL };
    float *dst[2] = { NULL, NULL };
    int nb = 0;
    bool has_mom = st_find(tf, "state.0.weight.momentum_buffer") != NULL;
    if (o->cfg.kind == OPTIM_ADAMW) {
        names[0] = "exp_avg", dst[0] = o->buf1;
        names[1] = "exp_avg_sq", dst[1] = o->buf2;
        nb = 2;
    } else if (has_mom || o->cfg.momentum != 0.0) {
        if (!has_mom && ostep > 0) {
            snprintf(err, errlen, "%s: saved without SGD momentum state, this run has --momentum %g", dir,
                     o->cfg.momentum);
            goto out;
        }
        if (has_mom && o->cfg.momentum == 0.0) {
            snprintf(err, errlen, "%s: saved with SGD momentum state, this run has --momentum 0", dir);
            goto out;
        }
        if (has_mom) names[0] = "momentum_buffer", dst[0] = o->buf1, nb = 1;
    }
    StTensor ot[2 * 2 * MODEL_MAX_LINEAR];
    int n = 0;
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < m->n_tensors; i++) {
            char name[128];
            snprintf(name, sizeof name, "state.%s.%s", m->tensors[i].name, names[b]);
            const StTensor *x = st_find(tf, name);
            if (check_tensor(tfile, name, x, &m->tensors[i], err, errlen)) goto out;
            ot[n++] = *x;
        }
    if (st_count(tf) != n) {
        snprintf(err, errlen, "%s: has %d tensors, %s state for this model has %d", tfile, st_count(tf), want, n);
        goto out;
    }
    if (!(s = meta_str(tf, tfile, "state_crc32", err, errlen))) goto out;
    snprintf(crc, sizeof crc, "%08" PRIx32, crc_tensors(ot, n));
    if (strcmp(crc, s)) {
        snprintf(err, errlen, "%s: tensor data does not match the checksum saved with it (corrupt or modified)", tfile);
        goto out;
    }

    /* Things that differ but do not stop a resume: said once, in note. */
    const OptimConfig *oc = &o->cfg;
    double mom = 0, damp = 0, wd = 0, b1 = 0, b2 = 0, eps = 0;
    bool nest = false;
    if (meta_f64(tf, tfile, "momentum", &mom, err, errlen) || meta_f64(tf, tfile, "dampening", &damp, err, errlen) ||
        meta_f64(tf, tfile, "weight_decay", &wd, err, errlen) || meta_f64(tf, tfile, "beta1", &b1, err, errlen) ||
        meta_f64(tf, tfile, "beta2", &b2, err, errlen) || meta_f64(tf, tfile, "eps", &eps, err, errlen) ||
        meta_bool(tf, tfile, "nesterov", &nest, err, errlen))
        goto out;
    if (differ(mom, oc->momentum) || differ(damp, oc->dampening) || differ(wd, oc->weight_decay) ||
        differ(b1, oc->beta1) || differ(b2, oc->beta2) || differ(eps, oc->eps) || nest != oc->nesterov)
        note_add(note, notelen, "optimizer hyper-parameters differ from the checkpoint's (this run's apply)");

    /* Everything checked: apply. */
    for (int i = 0; i < m->n_tensors; i++) {
        const ModelTensor *t = &m->tensors[i];
        memcpy(m->params + t->offset, mt[i].data, t->numel * sizeof(float));
    }
    for (int b = 0, j = 0; b < nb; b++)
        for (int i = 0; i < m->n_tensors; i++, j++) {
            const ModelTensor *t = &m->tensors[i];
            memcpy(dst[b] + t->offset, ot[j].data, t->numel * sizeof(float));
        }
    o->t = ostep;
    o->has_buf = o->cfg.kind == OPTIM_SGD && nb == 1;
    *meta = c;
    rc = 0;
out:
    st_close(&mf);
    st_close(&tf);
    return rc;
}
