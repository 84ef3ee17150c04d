/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_topofiles.h — a private data directory for the cluster targets:
 * <tmp>/data/examples/topologies/ holds the bundled topology NAMES, but with
 * `nvidia-smi topo -m` texts inside (the loader detects the format by
 * content). Cluster files then resolve "dgx-h100.xml" etc. without hwloc's
 * XML child probe, so one input costs no fork. The texts are the real
 * fixtures of tests/fixtures/realdata/topo/.
 */
#ifndef P3D_FUZZ_TOPOFILES_H
#define P3D_FUZZ_TOPOFILES_H

#include "fuzz_common.h"

#include <dirent.h>

#include "p3d/cluster.h"

static inline void fz_topo_dir(void)
{
    static const char *const map[][2] = {
        {"dgx-a100.xml", "tests/fixtures/realdata/topo/dgx-a100_12nic.txt"},
        {"dgx-h100.xml", "tests/fixtures/realdata/topo/dgx-a100_12nic.txt"},
        {"gb200-tray.xml", "tests/fixtures/realdata/topo/a6000x8_nvlink-bridge-pairs_pytorch79299.txt"},
        {"pcie8-nvlink-pairs.xml", "tests/fixtures/realdata/topo/a6000x8_nvlink-bridge-pairs_pytorch79299.txt"},
        {"dgx1-v100.xml", "tests/fixtures/realdata/topo/dgx1-v100_4nic.txt"},
        {"pcie4.xml", "tests/fixtures/realdata/topo/rtx4090x8_pcie-only_2nic_go-gpuallocator17.txt"},
        {"a.txt", "tests/fixtures/realdata/topo/dgx1_topo-mp_pcie-only.txt"},
    };
    char p[1024];
    snprintf(p, sizeof p, "%s/data", fz_tmpdir());
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/data/examples", fz_tmpdir());
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/data/examples/topologies", fz_tmpdir());
    mkdir(p, 0700);
    for (size_t i = 0; i < sizeof map / sizeof *map; i++) {
        size_t len;
        char *t = fz_slurp_src(map[i][1], &len);
        snprintf(p, sizeof p, "%s/data/examples/topologies/%s", fz_tmpdir(), map[i][0]);
        fz_write(p, t, len);
        /* also next to the cluster file, for relative names */
        snprintf(p, sizeof p, "%s/%s", fz_tmpdir(), map[i][0]);
        fz_write(p, t, len);
        free(t);
    }
    snprintf(p, sizeof p, "%s/data", fz_tmpdir());
    setenv("P3D_DATA_DIR", p, 1);
}

/* Installs lua/par3d.lua and its modules where policies find it and loads the cluster
 * file text json (written as <tmp>/file); aborts when it does not load,
 * since every input would then test nothing. */
static inline p3d_cluster *fz_policy_cluster(const char *who, const char *file, const char *json)
{
    char p[512], *err = NULL;
    size_t len;
    p3d_cluster *c = NULL;
    fz_topo_dir();
    snprintf(p, sizeof p, "%s/data/lua", fz_tmpdir());
    mkdir(p, 0700);
    char *helper = fz_slurp_src("lua/par3d.lua", &len);
    snprintf(p, sizeof p, "%s/data/lua/par3d.lua", fz_tmpdir());
    fz_write(p, helper, len);
    free(helper);
    /* and the modules it loads, lua/par3d/NAME.lua */
    snprintf(p, sizeof p, "%s/data/lua/par3d", fz_tmpdir());
    mkdir(p, 0700);
    char src[1024];
    snprintf(src, sizeof src, "%s/lua/par3d", P3D_FUZZ_SRC);
    DIR *d = opendir(src);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t nl = strlen(de->d_name);
        if (nl < 5 || strcmp(de->d_name + nl - 4, ".lua") != 0)
            continue;
        char rel[256];
        snprintf(rel, sizeof rel, "lua/par3d/%.200s", de->d_name);
        char *m = fz_slurp_src(rel, &len);
        if (snprintf(p, sizeof p, "%s/data/%.220s", fz_tmpdir(), rel) >= (int)sizeof p)
            abort(); /* the temp dir's name is short: never */
        fz_write(p, m, len);
        free(m);
    }
    if (d)
        closedir(d);
    fz_path(p, sizeof p, file);
    fz_write(p, json, strlen(json));
    if (p3d_cluster_load(p, &c, &err) < 0) {
        fprintf(stderr, "%s: fixed cluster does not load: %s\n", who, err);
        abort();
    }
    return c;
}

#endif
