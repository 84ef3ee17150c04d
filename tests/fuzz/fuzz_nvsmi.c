/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_nvsmi.c — `nvidia-smi topo -m` text (placement/topo/topo_nvsmi.c), the
 * content sniffer and, when a node comes out, its reports (they walk every
 * matrix the parser filled).
 */
#include "fuzz_common.h"

#include "topo_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fz_cstr(data, size), *err = NULL;
    p3d_node *n = NULL;
    (void)p3d_topo_looks_nvsmi(text);
    if (p3d_topo_parse_nvsmi("fuzz.txt", text, &n, &err) < 0) {
        if (!err || !*err || n)
            abort();
        goto out;
    }
    if (!n || n->ngpus < 0 || n->nnics < 0)
        abort();
    char *t = p3d_topo_text(n, 0), *j = p3d_topo_json(n);
    if (!t || !j)
        abort();
    free(t);
    free(j);
out:
    p3d_node_free(n);
    free(err);
    free(text);
    return 0;
}
