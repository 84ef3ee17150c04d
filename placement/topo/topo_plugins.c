/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_plugins.c — the topology source plugins' part in a load: the
 * 'nvml' plugin's augment step, which the hwloc and the NCCL readers
 * (topo_hwloc.c, topo_nccl.c) both run on what they read. Below them and
 * topo_load.c: it calls none of them.
 */
#include "topo_internal.h"
#include "say.h"
#include "p3d/plugin.h"

int p3d_topo_nvml_augment(p3d_node *n)
{
    const p3d_plugin *pl;
    char msg[512] = "";
    /* Absent is normal (an install without the plugin);
     * a present but unusable file was already said by the registry. */
    if (p3d_plugin_find(P3D_PLUGIN_TOPO, "nvml", &pl, NULL) <= 0)
        return 0;
    const p3d_topo_ops *ops = pl->ops;
    if (!ops->augment)
        return 0;
    int k = ops->augment(n, msg, sizeof msg);
    if (k == P3D_PLUGIN_FAIL)
        p3d_warn("topology source 'nvml' failed (%s); using hwloc's facts only", msg[0] ? msg : "no reason given");
    return k == P3D_PLUGIN_OK;
}
