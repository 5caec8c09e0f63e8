/* dataset.h — in-memory classification datasets: Fashion-MNIST IDX files and a
 * seeded synthetic set.
 *
 * Owns: loading (gzip IDX via zlib) and generation; x as float32 row-major
 * [n, dim], y as int32 class labels. Main thread only.
 */
#ifndef DDPTOP_DATASET_H
#define DDPTOP_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DATASET_FMNIST_DIR "/usr/share/datasets/fashion-mnist"

typedef struct {
    char name[32]; /* "fashion-mnist", "synthetic" */
    int64_t n;
    int dim, classes;
    float *x;   /* [n, dim] */
    int32_t *y; /* [n] */
} Dataset;

/* Load Fashion-MNIST from dir (train or t10k files, .gz), x = pixel/255.
 * limit > 0 keeps the first `limit` samples. Returns 0 or -1 with err. */
int dataset_load_fashion_mnist(Dataset *d, const char *dir, bool train, int64_t limit, char *err, size_t errlen);
/* True when the Fashion-MNIST training files exist in dir. */
bool dataset_fashion_mnist_present(const char *dir);
/* A seeded, learnable synthetic set: `classes` Gaussian clusters in `dim`
 * dimensions. Same arguments, same bytes, on every machine. */
int dataset_make_synthetic(Dataset *d, int64_t n, int dim, int classes, uint64_t seed, char *err, size_t errlen);
void dataset_done(Dataset *d);

#endif
