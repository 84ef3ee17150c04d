/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_hostlist.c — Slurm hostlist expressions (placement/cluster/hostlist.c).
 * Besides "no crash", checks the documented round trip: compressing the
 * expansion and expanding that again gives the same names in the same order.
 */
#include "fuzz_common.h"

#include "p3d/p3d.h"

/* Small enough that one input stays fast, big enough for real ranges. */
#define FZ_MAX_NAMES 20000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *expr = fz_cstr(data, size), *err = NULL, *err2 = NULL, *back = NULL;
    char **names = NULL, **again = NULL;
    size_t n = 0, n2 = 0;
    if (p3d_hostlist_expand(expr, &names, &n, FZ_MAX_NAMES, &err) < 0) {
        if (!err || !*err)
            abort(); /* a failure must say why */
        goto out;
    }
    if (n > FZ_MAX_NAMES)
        abort();
    back = p3d_hostlist_compress(names, n);
    if (!back)
        abort();
    if (p3d_hostlist_expand(back, &again, &n2, 0, &err2) < 0) {
        fprintf(stderr, "round trip: '%s' -> '%s' fails: %s\n", expr, back, err2);
        abort();
    }
    if (n2 != n) {
        fprintf(stderr, "round trip: '%s' -> '%s': %zu names, then %zu\n", expr, back, n, n2);
        abort();
    }
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], again[i])) {
            fprintf(stderr, "round trip: '%s' -> '%s': name %zu '%s' became '%s'\n", expr, back, i,
                    names[i], again[i]);
            abort();
        }
out:
    p3d_strv_free(names, n);
    p3d_strv_free(again, n2);
    free(back);
    free(err);
    free(err2);
    free(expr);
    return 0;
}
