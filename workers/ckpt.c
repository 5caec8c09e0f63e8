/* ckpt.c — writing checkpoint directories atomically. See ckpt.h.
 *
 * Order matters for crash safety: files fsynced, temp dir fsynced, rename,
 * parent fsynced, then `latest` replaced by rename of a fresh symlink.
 */
#include "ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"

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
    char p[640];
    const char *names[] = {"model.safetensors", "trainer.safetensors"};
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

int ckpt_write(const char *dir, const CkptMeta *meta, const Mlp *m, const Optim *o,
               char *path_out, size_t path_len, int64_t *bytes, char *err, size_t errlen)
{
    char tmpdir[600], final[600], file[640];
    if (mkdir_p(dir, err, errlen)) return -1;
    snprintf(final, sizeof final, "%s/step-%08" PRId64, dir, meta->step);
    snprintf(tmpdir, sizeof tmpdir, "%s/.tmp-step-%08" PRId64 "-%d", dir, meta->step, (int)getpid());
    rm_tree_flat(tmpdir); /* leftovers of a crashed attempt with our pid */
    if (mkdir(tmpdir, 0755)) {
        snprintf(err, errlen, "cannot create %s: %s", tmpdir, strerror(errno));
        return -1;
    }

    /* model.safetensors: PyTorch state_dict names and shapes. */
    StTensor t[2 * MODEL_MAX_LINEAR];
    for (int i = 0; i < m->n_tensors; i++) {
        const ModelTensor *mt = &m->tensors[i];
        memset(&t[i], 0, sizeof t[i]);
        snprintf(t[i].name, sizeof t[i].name, "%s", mt->name);
        snprintf(t[i].dtype, sizeof t[i].dtype, "F32");
        t[i].ndim = mt->ndim;
        for (int d = 0; d < mt->ndim; d++) t[i].shape[d] = mt->shape[d];
        t[i].data = m->params + mt->offset;
        t[i].nbytes = mt->numel * sizeof(float);
    }
    const char *model_meta[] = {"format", "pt", NULL};
    snprintf(file, sizeof file, "%s/model.safetensors", tmpdir);
    if (st_write(file, t, m->n_tensors, model_meta, err, errlen)) goto fail;

    /* trainer.safetensors: optimizer state, named after the parameters. */
    StTensor ot[4 * MODEL_MAX_LINEAR];
    int n = 0;
    const char *opt = o->cfg.kind == OPTIM_ADAMW ? "adamw" : "sgd";
    for (int b = 0; b < 2; b++) {
        const float *buf = b == 0 ? o->buf1 : o->buf2;
        if (!buf || (b == 0 && o->cfg.kind == OPTIM_SGD && !o->has_buf)) continue;
        const char *what = o->cfg.kind == OPTIM_ADAMW ? (b == 0 ? "exp_avg" : "exp_avg_sq")
                                                       : "momentum_buffer";
        for (int i = 0; i < m->n_tensors; i++) {
            const ModelTensor *mt = &m->tensors[i];
            StTensor *x = &ot[n++];
            memset(x, 0, sizeof *x);
            snprintf(x->name, sizeof x->name, "state.%s.%s", mt->name, what);
            snprintf(x->dtype, sizeof x->dtype, "F32");
            x->ndim = mt->ndim;
            for (int d = 0; d < mt->ndim; d++) x->shape[d] = mt->shape[d];
            x->data = buf + mt->offset;
            x->nbytes = mt->numel * sizeof(float);
        }
    }
    char s_step[32], s_epoch[32], s_seed[32], s_world[16], s_pos[32], s_t[32], s_lr[32];
    snprintf(s_step, sizeof s_step, "%" PRId64, meta->step);
    snprintf(s_epoch, sizeof s_epoch, "%" PRId64, meta->epoch);
    snprintf(s_seed, sizeof s_seed, "%" PRIu64, meta->seed);
    snprintf(s_world, sizeof s_world, "%d", meta->world);
    snprintf(s_pos, sizeof s_pos, "%" PRId64, meta->sampler_pos);
    snprintf(s_t, sizeof s_t, "%" PRId64, o->t);
    snprintf(s_lr, sizeof s_lr, "%.17g", o->cfg.lr);
    const char *tmeta[] = {"format", "ddptop-trainer-1", "step", s_step, "epoch", s_epoch,
                           "seed", s_seed, "world_size", s_world, "sampler_pos", s_pos,
                           "optimizer", opt, "optimizer_steps", s_t, "lr", s_lr,
                           "model", meta->model_spec ? meta->model_spec : "", NULL};
    snprintf(file, sizeof file, "%s/trainer.safetensors", tmpdir);
    if (st_write(file, ot, n, tmeta, err, errlen)) goto fail;

    if (fsync_path(tmpdir)) {
        snprintf(err, errlen, "fsync %s: %s", tmpdir, strerror(errno));
        goto fail;
    }
    struct stat st;
    if (stat(final, &st) == 0) {
        /* The same step twice (a request on the final step): keep the first. */
        rm_tree_flat(tmpdir);
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

    snprintf(path_out, path_len, "%s", final);
    char f1[640], f2[640];
    snprintf(f1, sizeof f1, "%s/model.safetensors", final);
    snprintf(f2, sizeof f2, "%s/trainer.safetensors", final);
    if (bytes) *bytes = file_size(f1) + file_size(f2);
    return 0;
fail:
    rm_tree_flat(tmpdir);
    return -1;
}

int ckpt_load_model(const char *file, Mlp *m, char *err, size_t errlen)
{
    StFile *f = NULL;
    if (st_open(file, &f, err, errlen)) return -1;
    int rc = -1;
    for (int i = 0; i < m->n_tensors; i++) {
        const ModelTensor *mt = &m->tensors[i];
        const StTensor *t = st_find(f, mt->name);
        if (!t) {
            snprintf(err, errlen, "%s: tensor \"%s\" missing (model %s expects it)", file, mt->name,
                     "mlp");
            goto out;
        }
        if (strcmp(t->dtype, "F32")) {
            snprintf(err, errlen, "%s: tensor \"%s\" is %s, expected F32", file, mt->name, t->dtype);
            goto out;
        }
        bool same = t->ndim == mt->ndim;
        for (int d = 0; same && d < mt->ndim; d++) same = t->shape[d] == mt->shape[d];
        if (!same) {
            snprintf(err, errlen, "%s: tensor \"%s\" has shape [%" PRId64 "%s%s], model expects [%" PRId64 "%s%s]",
                     file, mt->name, t->shape[0], t->ndim > 1 ? "," : "",
                     t->ndim > 1 ? "..." : "", mt->shape[0], mt->ndim > 1 ? "," : "", mt->ndim > 1 ? "..." : "");
            goto out;
        }
        memcpy(m->params + mt->offset, t->data, mt->numel * sizeof(float));
    }
    if (st_count(f) != m->n_tensors) {
        snprintf(err, errlen, "%s: has %d tensors, model expects %d", file, st_count(f), m->n_tensors);
        goto out;
    }
    rc = 0;
out:
    st_close(&f);
    return rc;
}
