/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fixture_plugin.c — rendezvous plugins for tests/unit/test_plugin_registry.c,
 * built three times (tests/CMakeLists.txt):
 *   FIXTURE_GOOD     p3d_rdzv_good.so: a correct descriptor; detect declines
 *   FIXTURE_OLD_ABI  p3d_rdzv_badabi.so: the descriptor of the old per-kind
 *                    ABI 1 (first field 1)
 *   FIXTURE_NO_SYM   p3d_rdzv_nosym.so: exports its descriptor under another name
 */
#include "p3d/plugin.h"
#include "rdzv.h"

#include <stdio.h>

static int detect(const char *arg, int o_nnodes, int o_node_rank, double timeout, p3d_rdzv_boot *boot, void **state,
                  char *msg, size_t msgcap)
{
    (void)arg, (void)o_nnodes, (void)o_node_rank, (void)timeout, (void)boot;
    *state = NULL;
    snprintf(msg, msgcap, "fixture: not my environment");
    return P3D_PLUGIN_DECLINE;
}

#if defined(FIXTURE_GOOD)
static const p3d_rdzv_ops ops = {.name = "good", .detect = detect};
P3D_PLUGIN_EXPORT(rdzv, good, P3D_PLUGIN_RDZV, &ops);
#elif defined(FIXTURE_OLD_ABI)
static const p3d_rdzv_ops ops = {.name = "badabi", .detect = detect};
const p3d_plugin p3d_rdzv_badabi = {1, P3D_PLUGIN_RDZV, "badabi", &ops};
#elif defined(FIXTURE_NO_SYM)
static const p3d_rdzv_ops ops = {.name = "nosym", .detect = detect};
const p3d_plugin p3d_rdzv_elsewhere = {P3D_PLUGIN_ABI, P3D_PLUGIN_RDZV, "nosym", &ops};
#else
#error "define FIXTURE_GOOD, FIXTURE_OLD_ABI or FIXTURE_NO_SYM"
#endif
