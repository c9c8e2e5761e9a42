/*
 * data.h -- Fashion-MNIST (or MNIST) from IDX files, gzipped or not.
 */
#ifndef TRAIN_DATA_H
#define TRAIN_DATA_H

#include <stddef.h>
#include <stdint.h>

struct dataset {
    size_t n;   /* images */
    size_t dim; /* pixels per image (784) */
    float *x;   /* n x dim, normalised: (v / 255 - 0.2860) / 0.3530 */
    uint8_t *y; /* n labels, 0..9 */
};

/*
 * Load DIR/PREFIX-images-idx3-ubyte[.gz] and DIR/PREFIX-labels-idx1-ubyte[.gz] (PREFIX "train"
 * or "t10k"); at most `limit` images (0: all). Returns 0, or -1 with the reason in err.
 */
int dataset_load(struct dataset *d, const char *dir, const char *prefix, size_t limit, char *err,
                 size_t errlen);

void dataset_free(struct dataset *d);

#endif
