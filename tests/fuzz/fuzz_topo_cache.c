/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_topo_cache.c — a topology cache record (placement/topo/topo_cache.c):
 * the decoder must refuse anything malformed with a message, and a record
 * it accepts must survive p3d_node_finish() and both reports (they walk
 * every matrix the decoder filled) and encode back to what it read.
 */
#include "fuzz_common.h"

#include "topo_cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fz_cstr(data, size), *why = NULL, *err = NULL, *again = NULL;
    p3d_node *n = NULL;
    p3d_topo_extra x;
    if (p3d_topo_raw_decode(text, &n, &x, &why) < 0) {
        if (!why || !*why || n)
            abort();
        goto out;
    }
    if (!n || n->ngpus < 0 || n->nnics < 0)
        abort();
    /* the decoder's output re-encodes to a record it accepts again */
    again = p3d_topo_raw_encode(n, &x);
    p3d_node *m = NULL;
    if (!again || p3d_topo_raw_decode(again, &m, &x, &why) < 0)
        abort();
    p3d_node_free(m);
    if (p3d_node_finish(n, &err) == 0) {
        char *t = p3d_topo_text(n, 0), *j = p3d_topo_json(n);
        if (!t || !j)
            abort();
        free(t);
        free(j);
    }
out:
    p3d_node_free(n);
    free(why);
    free(err);
    free(again);
    free(text);
    return 0;
}
