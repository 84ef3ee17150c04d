/* SPDX-License-Identifier: BSD-3-Clause */
/* test_alloc.c — the node's allocation (placement/cluster/alloc.c) from
 * environ-like inputs, as Slurm and an inherited CUDA_VISIBLE_DEVICES set
 * them, and the CUDA_VISIBLE_DEVICES each rank gets from it (rank_env.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "launch_fixture.h"
#include "rdzv.h"

static char h100[1024], dgx2[1024];

static int setup(void **st)
{
    (void)st;
    const char *src = getenv("P3D_SRC");
    const char *fx = getenv("P3D_FIXTURES");
    snprintf(h100, sizeof h100, "%s/examples/topologies/dgx-h100.xml", src ? src : "..");
    snprintf(dgx2, sizeof dgx2, "%s/realdata/hwloc/hwloc-tests-nvidiaDGX2.xml", fx ? fx : "fixtures");
    return 0;
}

static p3d_node *load(const char *path)
{
    p3d_node *n = NULL;
    char *err = NULL;
    if (p3d_topo_load(path, &n, &err) < 0)
        fail_msg("%s: %s", path, err);
    return n;
}

/* Reads the allocation; returns 0 or -1 with the message in *err. */
static int alloc_of(char **env, const p3d_node *n, p3d_alloc *a, char **err)
{
    free(*err);
    *err = NULL;
    return p3d_alloc_from_env(env, n, a, err);
}

static void test_slurm_renumbered(void **st)
{
    (void)st;
    p3d_node *n = load(h100);
    assert_int_equal(n->ngpus, 8);
    char pci4[32];
    snprintf(pci4, sizeof pci4, "%s", n->gpus[4].pci);
    double nv45 = n->nvlink[4 * 8 + 5];
    /* cgroup ConstrainDevices: the step sees its four GPUs as 0-3 */
    char *env[] = {"PATH=/bin", "SLURM_STEP_GPUS=4,5,6,7", "SLURM_JOB_GPUS=0,1,2,3,4,5,6,7",
                   "CUDA_VISIBLE_DEVICES=0,1,2,3", NULL};
    p3d_alloc a;
    char *err = NULL;
    assert_int_equal(alloc_of(env, n, &a, &err), 0);
    assert_int_equal(a.active, 1);
    assert_string_equal(a.var, "SLURM_STEP_GPUS");
    assert_int_equal(a.n, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(a.gpu[i], 4 + i);
        char want[8];
        snprintf(want, sizeof want, "%d", i);
        assert_string_equal(a.visible[i], want);
    }
    assert_int_equal(p3d_alloc_apply(&a, &n, 0, &err), 0);
    assert_int_equal(n->ngpus, 4);
    assert_string_equal(n->gpus[0].pci, pci4);
    assert_int_equal(n->gpus[0].index, 0);
    /* the node's own index stays with each GPU (P3D_GPU_PHYS) */
    for (int i = 0; i < 4; i++)
        assert_int_equal(n->gpus[i].phys, 4 + i);
    assert_string_equal(n->gpus[3].visible, "3");
    assert_true(n->nvlink[0 * 4 + 1] == nv45);
    assert_non_null(n->notes);
    assert_non_null(strstr(n->notes, "GPUs 0-3 of 8 excluded, not in SLURM_STEP_GPUS=4,5,6,7"));
    p3d_alloc_free(&a);
    p3d_node_free(n);
    free(err);
}

static void test_slurm_not_renumbered_and_job_gpus(void **st)
{
    (void)st;
    p3d_node *n = load(h100);
    char *err = NULL;
    p3d_alloc a;
    /* no ConstrainDevices: Slurm's CUDA_VISIBLE_DEVICES is the physical list */
    char *env[] = {"SLURM_STEP_GPUS=1,3,5,7", "CUDA_VISIBLE_DEVICES=1,3,5,7", NULL};
    assert_int_equal(alloc_of(env, n, &a, &err), 0);
    assert_int_equal(a.n, 4);
    assert_int_equal(a.gpu[1], 3);
    assert_string_equal(a.visible[1], "3");
    p3d_alloc_free(&a);
    /* the batch script: only SLURM_JOB_GPUS, no CUDA_VISIBLE_DEVICES; ranges */
    char *env2[] = {"SLURM_JOB_GPUS=0-1,6", "SLURM_STEP_GPUS=", NULL};
    assert_int_equal(alloc_of(env2, n, &a, &err), 0);
    assert_string_equal(a.var, "SLURM_JOB_GPUS");
    assert_int_equal(a.n, 3);
    assert_int_equal(a.gpu[2], 6);
    assert_string_equal(a.visible[2], "6");
    p3d_alloc_free(&a);
    p3d_node_free(n);
    free(err);
}

static void test_inherited_cvd(void **st)
{
    (void)st;
    p3d_node *n = load(h100);
    char *err = NULL;
    p3d_alloc a;
    char *none[] = {"HOME=/root", NULL};
    assert_int_equal(alloc_of(none, n, &a, &err), 0);
    assert_int_equal(a.active, 0);
    /* permuted: kept in PCI order, each with its own entry */
    char *env[] = {"CUDA_VISIBLE_DEVICES=6,2", NULL};
    assert_int_equal(alloc_of(env, n, &a, &err), 0);
    assert_string_equal(a.var, "CUDA_VISIBLE_DEVICES");
    assert_int_equal(a.n, 2);
    assert_int_equal(a.gpu[0], 2);
    assert_string_equal(a.visible[0], "2");
    assert_int_equal(a.gpu[1], 6);
    assert_int_equal(p3d_alloc_apply(&a, &n, 0, &err), 0);
    assert_non_null(strstr(n->notes, "GPUs 0-1,3-5,7 of 8 excluded, not in CUDA_VISIBLE_DEVICES=6,2"));
    p3d_alloc_free(&a);
    p3d_node_free(n);
    /* empty, or CUDA's "stop here" entries: no GPU */
    n = load(h100);
    char *empty[] = {"CUDA_VISIBLE_DEVICES=", NULL};
    assert_int_equal(alloc_of(empty, n, &a, &err), 0);
    assert_int_equal(a.active, 1);
    assert_int_equal(a.n, 0);
    p3d_alloc_free(&a);
    char *neg[] = {"CUDA_VISIBLE_DEVICES=0,-1,3", NULL};
    assert_int_equal(alloc_of(neg, n, &a, &err), 0);
    assert_int_equal(a.n, 1);
    p3d_alloc_free(&a);
    p3d_node_free(n);
    free(err);
}

static void test_uuids(void **st)
{
    (void)st;
    p3d_node *n = load(dgx2);
    assert_true(n->ngpus >= 2);
    assert_string_equal(n->gpus[0].uuid[0] ? "GPU-" : "none", "GPU-");
    char full[128], prefix[128];
    snprintf(full, sizeof full, "CUDA_VISIBLE_DEVICES=%s", n->gpus[1].uuid);
    snprintf(prefix, sizeof prefix, "CUDA_VISIBLE_DEVICES=%.16s", n->gpus[0].uuid);
    char *err = NULL;
    p3d_alloc a;
    char *env[] = {full, NULL};
    assert_int_equal(alloc_of(env, n, &a, &err), 0);
    assert_int_equal(a.n, 1);
    assert_int_equal(a.gpu[0], 1);
    assert_string_equal(a.visible[0], n->gpus[1].uuid);
    p3d_alloc_free(&a);
    char *env2[] = {prefix, NULL};
    assert_int_equal(alloc_of(env2, n, &a, &err), 0);
    assert_int_equal(a.gpu[0], 0);
    p3d_alloc_free(&a);
    char *bad[] = {"CUDA_VISIBLE_DEVICES=GPU-00000000-dead", NULL};
    assert_int_equal(alloc_of(bad, n, &a, &err), -1);
    assert_non_null(strstr(err, "no GPU of this node has UUID 'GPU-00000000-dead'"));
    char *amb[] = {"CUDA_VISIBLE_DEVICES=GPU-", NULL};
    assert_int_equal(alloc_of(amb, n, &a, &err), -1);
    assert_non_null(strstr(err, "give more of the UUID"));
    p3d_node_free(n);
    /* a record without UUIDs cannot match them */
    n = load(h100);
    assert_int_equal(alloc_of(bad, n, &a, &err), -1);
    assert_non_null(strstr(err, "carries no GPU UUIDs"));
    p3d_node_free(n);
    free(err);
}

static void test_errors(void **st)
{
    (void)st;
    p3d_node *n = load(h100);
    char *err = NULL;
    p3d_alloc a;
    struct {
        const char *a, *b, *want;
    } cases[] = {
        {"SLURM_STEP_GPUS=4,9", NULL, "SLURM_STEP_GPUS='4,9': GPU 9, but this node"},
        {"SLURM_STEP_GPUS=4,x", NULL, "'x' is not a GPU index or range"},
        {"SLURM_STEP_GPUS=3-1", NULL, "'3-1' is not a GPU index or range"},
        {"SLURM_STEP_GPUS=1,,2", NULL, "empty entry"},
        {"SLURM_STEP_GPUS=1,", NULL, "empty entry after the last comma"},
        {"SLURM_STEP_GPUS=1,1", NULL, "GPU 1 is listed twice"},
        {"SLURM_STEP_GPUS=4,5,6,7", "CUDA_VISIBLE_DEVICES=0,1", "cannot tell which device is which"},
        {"CUDA_VISIBLE_DEVICES=8", NULL, "GPU 8, but this node"},
        {"CUDA_VISIBLE_DEVICES=MIG-1234", NULL, "MIG instances"},
        {"CUDA_VISIBLE_DEVICES=2,2", NULL, "GPU 2 is listed twice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *env[] = {(char *)cases[i].a, (char *)cases[i].b, NULL};
        if (alloc_of(env, n, &a, &err) != -1)
            fail_msg("case %zu (%s) accepted", i, cases[i].a);
        if (!strstr(err, cases[i].want))
            fail_msg("case %zu: '%s' lacks '%s'", i, err, cases[i].want);
        assert_int_equal(a.n, 0);
    }
    /* more ranks than the allocation: the message names it */
    char *env[] = {"SLURM_STEP_GPUS=0,1,2,3", NULL};
    assert_int_equal(alloc_of(env, n, &a, &err), 0);
    assert_int_equal(p3d_alloc_apply(&a, &n, 8, &err), -1);
    assert_non_null(strstr(err, "--nproc-per-node 8: the allocation gives this node 4 GPUs (SLURM_STEP_GPUS=0,1,2,3)"));
    assert_int_equal(n->ngpus, 8); /* untouched on failure */
    assert_int_equal(p3d_alloc_apply(&a, &n, 4, &err), 0);
    assert_int_equal(n->ngpus, 4);
    p3d_alloc_free(&a);
    p3d_node_free(n);
    free(err);
}

/* The rank's CUDA_VISIBLE_DEVICES names its node's GPUs by the inherited
 * list's entries, in local-rank order. */
static void test_rank_cvd(void **st)
{
    (void)st;
    static fixture f;
    fixture_init(&f, 2, 4, 4, 2, 1); /* node 1's ranks hold GPUs 3,2,1,0 */
    const char *vis[] = {"GPU-aa", "GPU-bb", "GPU-cc", "GPU-dd"};
    for (int g = 0; g < 4; g++)
        snprintf(f.gpus[g].visible, sizeof f.gpus[g].visible, "%s", vis[g]);
    char *s0 = p3d_cuda_visible(&f.L, 0), *s1 = p3d_cuda_visible(&f.L, 1);
    assert_string_equal(s0, "GPU-aa,GPU-bb,GPU-cc,GPU-dd");
    assert_string_equal(s1, "GPU-dd,GPU-cc,GPU-bb,GPU-aa");
    free(s0);
    free(s1);
    f.gpus[2].visible[0] = 0; /* no allocation entry: the index */
    s0 = p3d_cuda_visible(&f.L, 0);
    assert_string_equal(s0, "GPU-aa,GPU-bb,2,GPU-dd");
    free(s0);
}

static void test_topology_addr_rack(void **st)
{
    (void)st;
    struct {
        const char *addr, *pat, *want;
    } cases[] = {
        {"spine1.leaf3.node17", "switch.switch.node", "leaf3"},
        {"leaf3.node17", "switch.node", "leaf3"},
        {"node17", "node", NULL}, /* no switch above the node */
        {"s1.s2.s3.n9", "switch.switch.switch.node", "s3"},
        {"spine1.leaf3.node17", NULL, "leaf3"},          /* no pattern: the last is the node */
        {"spine1.leaf3.node17", "switch.node", "leaf3"}, /* pattern of another shape: ignored */
        {"block4.n2", "block.node", "block4"},
        {"", "switch.node", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char a[128], p[128];
        snprintf(a, sizeof a, "SLURM_TOPOLOGY_ADDR=%s", cases[i].addr);
        snprintf(p, sizeof p, "SLURM_TOPOLOGY_ADDR_PATTERN=%s", cases[i].pat ? cases[i].pat : "");
        char *env[] = {a, cases[i].pat ? p : NULL, NULL};
        char *r = p3d_slurm_addr_rack(env);
        if (cases[i].want ? !r || strcmp(r, cases[i].want) : r != NULL)
            fail_msg("case %zu: got %s, want %s", i, r ? r : "NULL", cases[i].want ? cases[i].want : "NULL");
        free(r);
    }
    char *none[] = {"PATH=/bin", NULL};
    assert_null(p3d_slurm_addr_rack(none));
}

/* The rack travels as an optional trailing HELLO field: with and without */
static void test_hello_rack(void **st)
{
    (void)st;
    p3d_node *n = load(h100);
    for (int with = 0; with < 2; with++) {
        p3d_hello h = {.proto = P3D_WIRE_PROTO,
                       .version = P3D_VERSION,
                       .job_id = "j",
                       .nnodes = 4,
                       .node_rank = 2,
                       .hostname = "n3",
                       .addr = "10.0.0.3",
                       .master_port = 1,
                       .nccl_port = 2,
                       .topo = n,
                       .rack = with ? "leaf7" : NULL};
        p3d_wbuf b = {0};
        assert_int_equal(p3d_hello_encode(&h, &b), 0);
        p3d_hello got;
        char *err = NULL;
        if (p3d_hello_decode(b.p + 5, b.len - 5, &got, &err) < 0)
            fail_msg("%s", err);
        if (with)
            assert_string_equal(got.rack, "leaf7");
        else
            assert_null(got.rack);
        p3d_hello_free(&got);
        p3d_wbuf_free(&b);
    }
    p3d_node_free(n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slurm_renumbered),
        cmocka_unit_test(test_slurm_not_renumbered_and_job_gpus),
        cmocka_unit_test(test_inherited_cvd),
        cmocka_unit_test(test_uuids),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_rank_cvd),
        cmocka_unit_test(test_topology_addr_rack),
        cmocka_unit_test(test_hello_rack),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
