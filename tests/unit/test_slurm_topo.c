/* SPDX-License-Identifier: BSD-3-Clause */
/* test_slurm_topo.c — Slurm topology.conf (tree and block) and
 * topology.yaml applied to clusters: every real file in
 * fixtures/realdata/slurm/, the YAML fixtures in fixtures/slurm/ (one the
 * same fabric as two real topology.conf files), plus bad input and scale. Clusters are written as cluster files in a temp dir; every node
 * uses the DGX A100 `nvidia-smi topo -m` fixture. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "p3d/p3d.h"

static char tmpdir[256], topo[512], slurmdir[512], yamldir[512];

static char *tpath(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static char *fixture(const char *name)
{
    static char buf[768];
    snprintf(buf, sizeof buf, "%s/%s", slurmdir, name);
    return buf;
}

static void write_file(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void write_file(const char *name, const char *fmt, ...)
{
    FILE *f = fopen(tpath(name), "w");
    assert_non_null(f);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    const char *fx = getenv("P3D_FIXTURES");
    if (!fx)
        fx = "fixtures";
    snprintf(topo, sizeof topo, "%s/realdata/topo/dgx-a100_12nic.txt", fx);
    snprintf(slurmdir, sizeof slurmdir, "%s/realdata/slurm", fx);
    snprintf(yamldir, sizeof yamldir, "%s/slurm", fx);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/p3d-test-slurm-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A cluster of the nodes named by hostlist (optional rack per node: none). */
static p3d_cluster *cluster_of(const char *hostlist)
{
    write_file("c.json",
               "{\"nodes\": [{\"name\": \"%s\", \"topology\": "
               "\"%s\"}]}",
               hostlist, topo);
    p3d_cluster *c = NULL;
    char *err = NULL;
    if (p3d_cluster_load(tpath("c.json"), &c, &err) != 0)
        fail_msg("%s", err);
    return c;
}

static size_t node_index(const p3d_cluster *c, const char *name)
{
    for (size_t i = 0; i < c->nnodes; i++)
        if (!strcmp(c->nodes[i].name, name))
            return i;
    fail_msg("no node %s", name);
    return 0;
}

static const char *rack_of(const p3d_cluster *c, const char *name)
{
    return c->racks[c->nodes[node_index(c, name)].rack];
}

static int rack_index(const p3d_cluster *c, const char *rack)
{
    for (size_t i = 0; i < c->nracks; i++)
        if (!strcmp(c->racks[i], rack))
            return (int)i;
    fail_msg("no rack %s", rack);
    return -1;
}

static int has_warning(const p3d_cluster *c, const char *f1, const char *f2)
{
    for (size_t i = 0; i < c->nwarnings; i++)
        if (strstr(c->warnings[i], f1) && (!f2 || strstr(c->warnings[i], f2)))
            return 1;
    return 0;
}

static void dump_warnings(const p3d_cluster *c)
{
    for (size_t i = 0; i < c->nwarnings; i++)
        print_message("  warning: %s\n", c->warnings[i]);
}

static void apply_fails(p3d_cluster *c, const char *path, const char *f1, const char *f2)
{
    char *err = NULL;
    if (p3d_cluster_apply_slurm_topology(c, path, &err) == 0)
        fail_msg("%s should be rejected", path);
    assert_non_null(err);
    if (f1 && !strstr(err, f1))
        fail_msg("message '%s' lacks '%s'", err, f1);
    if (f2 && !strstr(err, f2))
        fail_msg("message '%s' lacks '%s'", err, f2);
    free(err);
}

static void apply_ok(p3d_cluster *c, const char *path)
{
    char *err = NULL;
    if (p3d_cluster_apply_slurm_topology(c, path, &err) != 0)
        fail_msg("%s: %s", path, err);
}

/* superpod circe: s0 lists n[019-020] without the circe- prefix (names
 * matching no node), circe-n051 is under s2 and s4, circe-n059 under none. */
static void test_circe(void **state)
{
    (void)state;
    p3d_cluster *c = cluster_of("circe-n[001-080]");
    apply_ok(c, fixture("slurm-superpod-circe_topology.conf"));
    dump_warnings(c);
    assert_true(has_warning(c, "switch s0 lists 2 names that match no node", "n[019-020] (did you mean circe-n019?)"));
    assert_true(has_warning(c, "node circe-n051 is listed under switches s2", "and s4; using s2"));
    /* circe-n019/020 are under no switch either (s0's entries miss them) */
    assert_true(has_warning(c, "3 nodes of the cluster are under no switch", "circe-n[019-020,059]"));
    assert_string_equal(rack_of(c, "circe-n001"), "s0");
    assert_string_equal(rack_of(c, "circe-n017"), "s1");
    assert_string_equal(rack_of(c, "circe-n051"), "s2");
    assert_string_equal(rack_of(c, "circe-n040"), "s3");
    assert_string_equal(rack_of(c, "circe-n037"), "s4");
    assert_string_equal(rack_of(c, "circe-n059"), "noswitch:circe-n059");
    assert_int_equal(c->nracks, 5 + 3);
    /* a flat file: no switch connects the leaves */
    assert_non_null(c->rack_dist);
    int s0 = rack_index(c, "s0"), s1 = rack_index(c, "s1");
    assert_int_equal(c->rack_dist[s0 * (int)c->nracks + s0], 0);
    assert_int_equal(c->rack_dist[s0 * (int)c->nracks + s1], -1);
    assert_string_equal(c->slurm_topology, fixture("slurm-superpod-circe_topology.conf"));
    size_t a = node_index(c, "circe-n041"), b = node_index(c, "circe-n051");
    assert_int_equal(p3d_cluster_link(c, a, 0, b, 0), P3D_LINK_RACK);
    a = node_index(c, "circe-n037");
    assert_int_equal(p3d_cluster_link(c, a, 0, b, 0), P3D_LINK_XRACK);
    p3d_cluster_free(c);
}

/* Azure cyclecloud tree: leaves sw00-sw04 with 3/6/3/2/2 nodes under sw05. */
static void test_azure_tree(void **state)
{
    (void)state;
    p3d_cluster *c = cluster_of("hpcbench-hpc-[1,35-49]");
    apply_ok(c, fixture("azure-cyclecloud-slurm_slurm_topology.conf"));
    dump_warnings(c);
    assert_int_equal(c->nwarnings, 0);
    assert_int_equal(c->nracks, 5);
    static const char *leaf[] = {"sw00", "sw01", "sw02", "sw03", "sw04"};
    static const int want[] = {3, 6, 3, 2, 2};
    for (int i = 0; i < 5; i++) {
        int r = rack_index(c, leaf[i]), n = 0;
        for (size_t k = 0; k < c->nnodes; k++)
            n += c->nodes[k].rack == r;
        assert_int_equal(n, want[i]);
    }
    /* racks are numbered in node-list order: hpc-1 is under sw01 */
    assert_string_equal(c->racks[0], "sw01");
    assert_string_equal(rack_of(c, "hpcbench-hpc-36"), "sw00");
    int r0 = rack_index(c, "sw00"), r3 = rack_index(c, "sw03");
    assert_int_equal(c->rack_dist[r0 * 5 + r3], 2);
    assert_int_equal(c->rack_dist[r3 * 5 + r0], 2);
    assert_int_equal(c->rack_dist[r3 * 5 + r3], 0);
    /* restricting keeps the distances of the racks that remain */
    char *err = NULL;
    assert_int_equal(p3d_cluster_restrict(c, "hpcbench-hpc-[40,36]", &err), 0);
    assert_int_equal(c->nracks, 2);
    assert_string_equal(c->racks[0], "sw03");
    assert_int_equal(c->rack_dist[1], 2);
    assert_int_equal(c->rack_dist[3], 0);
    p3d_cluster_free(c);
}

/* The IB fabric capture: GUID names and ibsw47 both parent and child of
 * every aggregation switch. Rejected, naming the cycle; never loops. */
static void test_azure_cyclic(void **state)
{
    (void)state;
    p3d_cluster *c = cluster_of("hpcbench-hpc-[1-72]");
    apply_fails(c, fixture("azure-cyclecloud-slurm_topology.conf"), "switches form a cycle: ibsw14 -> ibsw47 -> ibsw14",
                NULL);
    /* nothing changed */
    assert_null(c->slurm_topology);
    assert_int_equal(c->nracks, 1);
    assert_int_equal(c->nwarnings, 0);
    p3d_cluster_free(c);
}

/* topology/block: 4 blocks x 18 nodes, membership interleaved. */
static void test_azure_block(void **state)
{
    (void)state;
    p3d_cluster *c = cluster_of("hpcbench-hpc-[1-72]");
    apply_ok(c, fixture("azure-cyclecloud-slurm_block_topology.conf"));
    dump_warnings(c);
    assert_int_equal(c->nwarnings, 0);
    assert_int_equal(c->nnvl_domains, 4);
    assert_string_equal(c->nvl_domains[0], "block_5e797fc6-0f46-421a-8724-0e102c0f723c");
    int count[4] = {0};
    for (size_t i = 0; i < c->nnodes; i++) {
        assert_true(c->nodes[i].nvl_domain >= 0);
        count[c->nodes[i].nvl_domain]++;
        /* hpc-k is in block (k-1) % 4 */
        assert_int_equal(c->nodes[i].nvl_domain, (int)(i % 4));
    }
    for (int d = 0; d < 4; d++)
        assert_int_equal(count[d], 18);
    assert_int_equal(p3d_cluster_link(c, 0, 0, 4, 0), P3D_LINK_MNNVL);
    assert_int_equal(p3d_cluster_link(c, 0, 0, 1, 0), P3D_LINK_RACK);
    /* racks untouched by a block file */
    assert_int_equal(c->nracks, 1);
    p3d_cluster_free(c);
}

/* Every file in the fixture directory gives a result or a clear message —
 * none crashes or hangs (a new fixture is exercised automatically). */
static void test_every_fixture(void **state)
{
    (void)state;
    DIR *d = opendir(slurmdir);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        p3d_cluster *c = cluster_of("hpcbench-hpc-[1-72],circe-n[001-080]");
        char *err = NULL;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", slurmdir, e->d_name);
        int rc = p3d_cluster_apply_slurm_topology(c, path, &err);
        print_message("  %s: %s\n", e->d_name, rc == 0 ? "applied" : err);
        if (rc != 0)
            assert_non_null(strstr(err, e->d_name));
        free(err);
        p3d_cluster_free(c);
        n++;
    }
    closedir(d);
    assert_true(n >= 4);
}

static void test_bad_input(void **state)
{
    (void)state;
    p3d_cluster *c = cluster_of("n[1-4]");
    write_file("t1.conf", "SwitchName=s0 Nodes=n[1-2]\nSwitchName=s0 Nodes=n[3-4]\n");
    apply_fails(c, tpath("t1.conf"),
                "t1.conf:2: switch 's0' is already "
                "defined on line 1",
                NULL);
    write_file("t2.conf", "SwitchName=s0 Nodes=n[1-4]\nSwitchName=top Switches=s[0-1]\n");
    apply_fails(c, tpath("t2.conf"), "t2.conf:2: switch top lists switch 's1'", "no SwitchName= line defines");
    write_file("t3.conf", "SwitchName=s0 Nodes=n[1-4] Switches=s0\n");
    apply_fails(c, tpath("t3.conf"), "cycle: s0 -> s0", NULL);
    write_file("t4.conf", "# comment\n\nSwitchName=s0 Nodes=n[1-4]\n"
                          "BlockName=b0 Nodes=n[1-4]\n");
    apply_fails(c, tpath("t4.conf"), "t4.conf:4: BlockName=", "either");
    write_file("t5.conf", "NodeName=n1 CPUs=4\n");
    apply_fails(c, tpath("t5.conf"), "t5.conf:1: NodeName= belongs in slurm.conf", NULL);
    write_file("t6.conf", "SwitchName=s0 Nodes=n[1-\n");
    apply_fails(c, tpath("t6.conf"), "t6.conf:1: switch s0: Nodes=: hostlist", "never closed");
    write_file("t7.conf", "SwitchName=s0 Nodes=x[1-4]\n");
    apply_fails(c, tpath("t7.conf"),
                "no node of the cluster (n1...) is under "
                "any switch",
                "another machine");
    write_file("t8.conf", "SwitchName=ib1 Nodes=0x155dfffd33ff7d,0x155dfffd33ffbd\n");
    apply_fails(c, tpath("t8.conf"), "InfiniBand GUIDs", NULL);
    write_file("t9.conf", "SwitchName=s0 Nodes n1\n");
    apply_fails(c, tpath("t9.conf"), "t9.conf:1: expected Key=Value", "'Nodes'");
    write_file("t10.conf", "Frobnicate=1\n");
    apply_fails(c, tpath("t10.conf"),
                "expected SwitchName=, BlockName= or "
                "BlockSizes=",
                NULL);
    write_file("t11.conf", "# only comments\n\n");
    apply_fails(c, tpath("t11.conf"), "no SwitchName= or BlockName= lines", NULL);
    write_file("t12.conf", "BlockName=b0 Nodes=n[1-4]\nBlockSizes=4,x\n");
    apply_fails(c, tpath("t12.conf"), "t12.conf:2: BlockSizes", NULL);
    write_file("t13.yaml", "---\n");
    apply_fails(c, tpath("t13.yaml"), "topology.yaml", NULL);
    apply_fails(c, tpath("nonexistent.conf"), "cannot open", NULL);
    write_file("t14.conf", "SwitchName=a Switches=b\nSwitchName=b Switches=c\n"
                           "SwitchName=c Switches=a\nSwitchName=d Nodes=n[1-4]\n");
    apply_fails(c, tpath("t14.conf"),
                "t14.conf:3: switches form a cycle: "
                "a -> b -> c -> a",
                NULL);
    /* after all these failures the cluster is unchanged */
    assert_int_equal(c->nracks, 1);
    assert_null(c->slurm_topology);
    p3d_cluster_free(c);
}

static void test_tree_details(void **state)
{
    (void)state;
    p3d_cluster *c = cluster_of("n[1-8]");
    /* continuation lines, comments, keys in any case, a switch under two
     * parents (warning), a node under no switch, LinkSpeed ignored, an
     * unknown key warned */
    write_file("d.conf", "SwitchName=leaf1 Nodes=n[1-2] LinkSpeed=100 # rack A\n"
                         "switchname=leaf2 \\\n   nodes=n[3-4]\n"
                         "SwitchName=leaf3 Nodes=n[5-7] Color=blue\n"
                         "SwitchName=spine1 Switches=leaf[1-2]\n"
                         "SwitchName=spine2 Switches=leaf[2-3]\n"
                         "SwitchName=core Switches=spine[1-2]\n");
    apply_ok(c, tpath("d.conf"));
    dump_warnings(c);
    assert_true(has_warning(c, "d.conf:4: unknown key 'Color'", NULL));
    assert_true(has_warning(c, "switch leaf2 is listed under 2 switches", NULL));
    assert_true(has_warning(c, "under no switch", "n8"));
    assert_int_equal(c->nracks, 4);
    int l1 = rack_index(c, "leaf1"), l2 = rack_index(c, "leaf2"), l3 = rack_index(c, "leaf3"),
        l8 = rack_index(c, "noswitch:n8");
    int n = (int)c->nracks;
    assert_int_equal(c->rack_dist[l1 * n + l2], 2); /* via spine1 */
    assert_int_equal(c->rack_dist[l2 * n + l3], 2); /* via spine2 */
    assert_int_equal(c->rack_dist[l1 * n + l3], 4); /* via the core */
    assert_int_equal(c->rack_dist[l1 * n + l8], -1);
    assert_int_equal(c->rack_dist[l8 * n + l8], 0);
    assert_int_equal(p3d_cluster_link(c, 7, 0, 6, 0), P3D_LINK_XRACK);
    p3d_cluster_free(c);

    /* racks from the cluster file are replaced, with a warning */
    write_file("rk.json",
               "{\"nodes\": [{\"name\": \"n[1-2]\", \"topology\": "
               "\"%s\", \"rack\": \"old\"}]}",
               topo);
    char *err = NULL;
    assert_int_equal(p3d_cluster_load(tpath("rk.json"), &c, &err), 0);
    write_file("rk.conf", "SwitchName=s Nodes=n[1-2]\n");
    apply_ok(c, tpath("rk.conf"));
    assert_true(has_warning(c, "leaf switches replace the racks", NULL));
    assert_int_equal(c->nracks, 1);
    assert_string_equal(c->racks[0], "s");
    p3d_cluster_free(c);
}

/* A deep chain of switches: the DFS is iterative, so 100,000 levels neither
 * overflow the stack nor take long. */
static void test_deep_chain(void **state)
{
    (void)state;
    FILE *f = fopen(tpath("chain.conf"), "w");
    fprintf(f, "SwitchName=s0 Nodes=n[1-4]\n");
    for (int i = 1; i < 100000; i++)
        fprintf(f, "SwitchName=s%d Switches=s%d\n", i, i - 1);
    fclose(f);
    p3d_cluster *c = cluster_of("n[1-4]");
    apply_ok(c, tpath("chain.conf"));
    assert_int_equal(c->nracks, 1);
    p3d_cluster_free(c);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* 16,384 nodes under 512 leaf switches, 16 spines, one core: applying it
 * (rack distances included) stays far below the dry run's 2 s budget. */
static void test_scale(void **state)
{
    (void)state;
    FILE *f = fopen(tpath("big.conf"), "w");
    for (int l = 0; l < 512; l++)
        fprintf(f, "SwitchName=leaf%03d Nodes=node[%05d-%05d]\n", l, l * 32 + 1, l * 32 + 32);
    for (int s = 0; s < 16; s++)
        fprintf(f, "SwitchName=spine%02d Switches=leaf[%03d-%03d]\n", s, s * 32, s * 32 + 31);
    fprintf(f, "SwitchName=core Switches=spine[00-15]\n");
    fclose(f);
    f = fopen(tpath("bigb.conf"), "w");
    for (int b = 0; b < 16384 / 18; b++)
        fprintf(f, "BlockName=nvl%03d Nodes=node[%05d-%05d]\n", b, b * 18 + 1, b * 18 + 18);
    fprintf(f, "BlockSizes=18\n");
    fclose(f);
    p3d_cluster *c = cluster_of("node[00001-16384]");
    double t0 = now();
    apply_ok(c, tpath("big.conf"));
    double t1 = now();
    apply_ok(c, tpath("bigb.conf"));
    double t2 = now();
    print_message("16384 nodes: tree (512 leaves) %.3f s, block (910 blocks) "
                  "%.3f s\n",
                  t1 - t0, t2 - t1);
    assert_int_equal(c->nracks, 512);
    assert_int_equal(c->nnvl_domains, 910);
    int n = (int)c->nracks;
    assert_int_equal(c->rack_dist[0 * n + 1], 2);
    assert_int_equal(c->rack_dist[0 * n + 511], 4);
    assert_true(has_warning(c, "4 nodes of the cluster are in no block", "node[16381-16384]"));
    p3d_cluster_free(c);
}

static char *yaml_fixture(const char *name)
{
    static char buf[768];
    snprintf(buf, sizeof buf, "%s/%s", yamldir, name);
    return buf;
}

/* The Azure tree and block topology.conf files written as one
 * topology.yaml give the same racks, switch distances and NVLink domains
 * as the two files applied one after the other. */
static void test_yaml_equals_conf(void **state)
{
    (void)state;
    p3d_cluster *a = cluster_of("hpcbench-hpc-[1-72]");
    p3d_cluster *b = cluster_of("hpcbench-hpc-[1-72]");
    apply_ok(a, yaml_fixture("azure-tree-block.yaml"));
    apply_ok(b, fixture("azure-cyclecloud-slurm_slurm_topology.conf"));
    apply_ok(b, fixture("azure-cyclecloud-slurm_block_topology.conf"));
    dump_warnings(a);
    assert_int_equal(a->nracks, b->nracks);
    assert_int_equal(a->nracks, 5 + 72 - 16); /* 5 leaf switches, 56 nodes under none */
    for (size_t r = 0; r < a->nracks; r++)
        assert_string_equal(a->racks[r], b->racks[r]);
    assert_non_null(a->rack_dist);
    assert_memory_equal(a->rack_dist, b->rack_dist, a->nracks * a->nracks * sizeof *a->rack_dist);
    assert_int_equal(a->nnvl_domains, 4);
    assert_int_equal(a->nnvl_domains, b->nnvl_domains);
    for (size_t d = 0; d < a->nnvl_domains; d++)
        assert_string_equal(a->nvl_domains[d], b->nvl_domains[d]);
    for (size_t i = 0; i < a->nnodes; i++) {
        assert_int_equal(a->nodes[i].rack, b->nodes[i].rack);
        assert_int_equal(a->nodes[i].nvl_domain, b->nodes[i].nvl_domain);
    }
    assert_string_equal(rack_of(a, "hpcbench-hpc-36"), "sw00");
    assert_string_equal(a->slurm_topology, yaml_fixture("azure-tree-block.yaml"));
    p3d_cluster_free(a);
    p3d_cluster_free(b);
}

/* The shape of topology.yaml(5)'s example: a cluster_default tree, a
 * block topology (its sequence at the key's column) and a flat one; a
 * second tree listed first loses to the cluster_default one, said once. */
static void test_yaml_manual_example(void **state)
{
    (void)state;
    p3d_cluster *c = cluster_of("node[01-16]");
    apply_ok(c, yaml_fixture("manual-example.yaml"));
    assert_string_equal(rack_of(c, "node03"), "sw_root");
    assert_string_equal(rack_of(c, "node05"), "noswitch:node05");
    assert_int_equal(c->nnvl_domains, 4);
    assert_string_equal(c->nvl_domains[c->nodes[node_index(c, "node06")].nvl_domain], "b2");
    assert_true(has_warning(c, "12 nodes of the cluster are under no switch", NULL));
    p3d_cluster_free(c);

    c = cluster_of("n[1-4]");
    write_file("two-trees.yml", "- topology: other\n  tree:\n    switches:\n      - {switch}\n");
    apply_fails(c, tpath("two-trees.yml"), "two-trees.yml:4: switch without 'switch:'", NULL);
    write_file("two-trees.yml", "# two trees; the default one wins\n"
                                "- topology: other\n"
                                "  tree:\n"
                                "    switches:\n"
                                "      - switch: all\n"
                                "        nodes: n[1-4]\n"
                                "- topology: \"main\"   # quoted name\n"
                                "  cluster_default: yes\n"
                                "  tree:\n"
                                "    switches:\n"
                                "      - switch: left\n"
                                "        nodes: [n1, 'n2']\n"
                                "      - switch: right\n"
                                "        nodes: n[3-4]\n"
                                "      - switch: spine\n"
                                "        children: [left, right]\n"
                                "        speed: 100\n");
    apply_ok(c, tpath("two-trees.yml"));
    dump_warnings(c);
    assert_string_equal(rack_of(c, "n2"), "left");
    assert_string_equal(rack_of(c, "n4"), "right");
    assert_int_equal(c->rack_dist[1], 2);
    assert_true(has_warning(c, "2 tree topologies; using 'main' (line 7, cluster_default)", NULL));
    assert_true(has_warning(c, "two-trees.yml:17: unknown key 'speed' in switch ignored", NULL));
    assert_int_equal(c->nnvl_domains, 0);
    p3d_cluster_free(c);
}

static void test_yaml_bad(void **state)
{
    (void)state;
    static const struct {
        const char *text, *want1, *want2;
    } cases[] = {
        {"- topology: t\n\ttree:\n", "y.yaml:2: a tab in the indentation", NULL},
        {"- topology: t\n  tree: &a\n", "y.yaml:2: an anchor 'a' is not accepted", NULL},
        {"- topology: t\n  tree:\n    switches:\n    - switch: s\n      nodes: *x\n",
         "y.yaml:5: an alias 'x' is not accepted", NULL},
        {"- topology: t\n  tree:\n    switches:\n    - switch: s\n      nodes: n1\n      nodes: n2\n",
         "y.yaml:6: 'nodes' appears twice (first on line 5)", NULL},
        {"- topology: t\n  flat: true\n  tree:\n    switches:\n    - switch: s\n      nodes: n1\n",
         "y.yaml:1: topology t: needs exactly one of 'tree:', 'block:' or 'flat: true' (found 2)", NULL},
        {"- cluster_default: true\n  flat: true\n", "y.yaml:1: topology without 'topology:'", NULL},
        {"- topology: t\n  tree:\n    switches:\n    - switch: s\n      children: nope\n",
         "y.yaml:4: switch s lists switch 'nope'", NULL},
        {"- topology: t\n  tree:\n    switches:\n    - switch: a\n      children: b\n    - switch: b\n"
         "      children: a\n    - switch: c\n      nodes: n[1-4]\n",
         "switches form a cycle", NULL},
        {"- topology: t\n  flat: true\n", "only flat topologies", NULL},
        {"# nothing\n", "no topologies", NULL},
        {"---\n- topology: t\n  flat: true\n---\n- topology: u\n  flat: true\n", "y.yaml:4: one YAML document", NULL},
        {"- topology: t\n  block:\n    block_sizes: [16, 4]\n    blocks:\n    - block: b\n      nodes: n1\n",
         "y.yaml:3: block_sizes: 4 after 16", NULL},
        {"- topology: t\n  block:\n    block_sizes: [4, x]\n    blocks:\n    - block: b\n      nodes: n1\n",
         "y.yaml:3: block_sizes: expected positive node counts, found 'x'", NULL},
        {"- topology: 't\n", "y.yaml:1:13: invalid YAML: found unexpected end of stream", "scanning a quoted scalar"},
        {"- topology: t\n  tree:\n    switches:\n    - switch: "
         "s0123456789012345678901234567890123456789012345678901234567890123456789\n      nodes: n1\n",
         "longer than 64 characters", NULL},
        {"topology: t\nflat: true\n", "y.yaml:1: a topology.yaml is a list of topologies", NULL},
        {"- topology: t\n  tree:\n    switches:\n    - switch: s\n      nodes: n[1-4]\n        extra: 1\n",
         "y.yaml:6:14: invalid YAML: mapping values are not allowed", "indentation"},
        {"- topology: t\n  tree:\n    switches: []\n", "y.yaml:3: topology t: 'switches:' is empty", NULL},
        {"- topology: t\n  tree:\n    switches:\n    - switch: s\n      nodes: [n1, [n2]]\n",
         "y.yaml:5: nodes: item 2 is not a name", NULL},
        {"- topology: t\n  tree:\n    switches:\n    - switch: s\n      nodes: x[1-4]\n",
         "no node of the cluster (n1...) is under any switch", NULL},
        {"- topology: t\n  flat: true\n- topology: t\n  flat: true\n",
         "y.yaml:3: topology 't' is already defined on "
         "line 1",
         NULL},
        {"- topology: t\n  cluster_default: maybe\n  flat: true\n", "y.yaml:2: cluster_default: expected true or false",
         NULL},
        /* tags, anchors on any node, duplicate keys at any level, a
         * mapping as a key: refused with the line */
        {"- topology: !!str t\n  flat: true\n", "y.yaml:1: a tag '!!str' is not accepted", NULL},
        {"- topology: t\n  tree: !fabric\n    switches: []\n", "y.yaml:2: a tag '!fabric' is not accepted", NULL},
        {"- &top\n  topology: t\n  flat: true\n", "y.yaml:1: an anchor 'top' is not accepted", NULL},
        {"- topology: t\n  block:\n    blocks:\n    - block: b\n      nodes: &n n[1-4]\n    - block: c\n"
         "      nodes: *n\n",
         "y.yaml:5: an anchor 'n' is not accepted", NULL},
        {"- topology: t\n  topology: u\n  flat: true\n", "y.yaml:2: 'topology' appears twice (first on line 1)", NULL},
        {"- topology: t\n  tree:\n    switches: []\n  tree:\n    switches: []\n",
         "y.yaml:4: 'tree' appears twice (first on line 2)", NULL},
        {"- ? [a, b]\n  : x\n", "y.yaml:1: a mapping key must be a name, not a list", NULL},
        {"%YAML 1.1\n---\n- topology: t\n  flat: true\n", "y.yaml:1: YAML directives", NULL},
        {"- topology: t\n  tree:\n    switches:\n    - switch: s\n      nodes: \"n\\x01\"\n",
         "y.yaml:5: control character 0x01 in a value", NULL},
    };
    p3d_cluster *c = cluster_of("n[1-4]");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file("y.yaml", "%s", cases[i].text);
        print_message("  case %zu\n", i);
        apply_fails(c, tpath("y.yaml"), cases[i].want1, cases[i].want2);
    }
    /* YAML nested past the bound is an error, not a deep recursion */
    FILE *f = fopen(tpath("deep.yaml"), "w");
    assert_non_null(f);
    for (int d = 0; d < 5000; d++)
        fprintf(f, "%*s- \n", d, "");
    fclose(f);
    apply_fails(c, tpath("deep.yaml"), "nested deeper than", NULL);
    /* flow style is YAML too: the same tree written on one line */
    write_file("flow.yaml", "[{topology: t, tree: {switches: [{switch: s, nodes: 'n[1-4]'}]}}]\n");
    apply_ok(c, tpath("flow.yaml"));
    assert_string_equal(rack_of(c, "n2"), "s");
    /* and so are block scalars and comments anywhere */
    write_file("folded.yaml", "- topology: t  # the fabric\n  tree:\n    switches:\n    - switch: s\n"
                              "      nodes: >-\n        n[1-2],\n        n[3-4]\n");
    apply_ok(c, tpath("folded.yaml"));
    assert_string_equal(rack_of(c, "n4"), "s");
    /* sniffed by content whatever the name: a '-' first means YAML */
    write_file("topology.conf", "- topology: t\n  tree:\n    switches:\n    - switch: s\n      nodes: n[1-4]\n");
    apply_ok(c, tpath("topology.conf"));
    assert_string_equal(rack_of(c, "n3"), "s");
    p3d_cluster_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_circe),
        cmocka_unit_test(test_azure_tree),
        cmocka_unit_test(test_azure_cyclic),
        cmocka_unit_test(test_azure_block),
        cmocka_unit_test(test_every_fixture),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_tree_details),
        cmocka_unit_test(test_deep_chain),
        cmocka_unit_test(test_scale),
        cmocka_unit_test(test_yaml_equals_conf),
        cmocka_unit_test(test_yaml_manual_example),
        cmocka_unit_test(test_yaml_bad),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
