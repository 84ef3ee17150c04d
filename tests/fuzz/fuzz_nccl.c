/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_nccl.c — NCCL topology XML (placement/topo/topo_nccl.c): the content
 * sniffer, the strict XML reader and the topology built from it, then its
 * reports (they walk every matrix the parser filled). No NVML augment: the
 * fuzzer must not load plugins.
 */
#include "fuzz_common.h"

#include "topo_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fz_cstr(data, size), *err = NULL;
    p3d_node *n = NULL;
    (void)p3d_topo_looks_nccl(text, size);
    if (p3d_topo_parse_nccl("fuzz.xml", text, size, 0, &n, &err) < 0) {
        if (!err || !*err || n)
            abort();
        goto out;
    }
    if (!n || err || n->ngpus < 0 || n->nnics < 0 || n->ndomains < (n->ngpus ? 1 : 0))
        abort();
    for (int i = 0; i < n->ngpus; i++)
        if (n->gpus[i].domain < 0 || n->gpus[i].domain >= n->ndomains)
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
