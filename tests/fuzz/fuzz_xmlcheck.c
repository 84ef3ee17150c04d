/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_xmlcheck.c — the hwloc-XML pre-validator's text scan
 * (p3d_topo_xml_check in placement/topo/topo_xmlcheck.c). The hwloc child probe
 * is not run here: the fuzzer must not fork per input.
 */
#include "fuzz_common.h"

#include "topo_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fz_cstr(data, size), *err = NULL;
    int rc = p3d_topo_xml_check("fuzz.xml", text, size, &err);
    if (rc < 0 && (!err || !*err))
        abort();
    if (rc == 0 && err)
        abort();
    free(err);
    free(text);
    return 0;
}
