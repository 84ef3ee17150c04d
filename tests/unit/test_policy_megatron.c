/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_policy_megatron.c — the bundled policies on synthetic clusters.
 *
 * Megatron's groups: for every case of tests/fixtures/realdata/
 * megatron_cases.md, megatron.lua's placement must imply exactly the groups
 * Megatron-LM forms (checked against the md's literal lists and against an
 * independent port of the test's loop-based golden function), and the
 * physical rules must hold (TP inside a domain, pipelines inside a rack,
 * rank 0 on the first node). Then ~200 randomized meshes and order strings
 * (fixed seed) and the degradations with their notes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <time.h>

#include "policy_fixture.h"
#include "policy_internal.h"

static p3d_placement *place(const char *policy, const p3d_cluster *c, const p3d_job *j)
{
    p3d_placement *pl = NULL;
    char *msg = NULL;
    if (p3d_policy_run(policy, NULL, c, j, &pl, &msg) < 0) {
        fprintf(stderr, "%s failed: %s\n", policy, msg);
        free(msg);
        fail();
    }
    return pl;
}

static int has_note(const p3d_placement *pl, const char *s)
{
    for (size_t i = 0; i < pl->nnotes; i++)
        if (strstr(pl->notes[i], s))
            return 1;
    return 0;
}

/* rep[r] = smallest rank sharing every coordinate outside `mask` with r,
 * computed from the coordinates the policy returned (not from mesh.c). */
static int *reps_from_coords(const p3d_placement *pl, unsigned mask)
{
    /* the coordinates of one grid (p3d/job.h) number the ranks */
    static const int dense[4] = {P3D_DIM_TP, P3D_DIM_CP, P3D_DIM_DP, P3D_DIM_PP},
                     expert[4] = {P3D_DIM_ETP, P3D_DIM_EP, P3D_DIM_EDP, P3D_DIM_PP};
    const int *grid = mask & ((1u << P3D_DIM_EP) | (1u << P3D_DIM_ETP) | (1u << P3D_DIM_EDP)) ? expert : dense;
    int w = pl->world;
    int *key_min = malloc((size_t)w * sizeof *key_min), *rep = malloc((size_t)w * sizeof *rep);
    for (int i = 0; i < w; i++)
        key_min[i] = -1;
    for (int pass = 0; pass < 2; pass++)
        for (int r = 0; r < w; r++) {
            long key = 0;
            for (int k = 0; k < 4; k++) {
                int d = grid[k];
                key = key * p3d_mesh_size(&pl->mesh, d) + ((mask >> d) & 1 ? 0 : pl->ranks[r].coord[d]);
            }
            assert_true(key >= 0 && key < w);
            if (pass == 0 && (key_min[key] < 0 || r < key_min[key]))
                key_min[key] = r;
            if (pass == 1)
                rep[r] = key_min[key];
        }
    free(key_min);
    return rep;
}

/* The same from explicit group lists: groups[g*gsize + k]. */
static int *reps_from_lists(int w, const int *groups, int ngroups, int gsize)
{
    int *rep = malloc((size_t)w * sizeof *rep);
    for (int i = 0; i < w; i++)
        rep[i] = -1;
    for (int g = 0; g < ngroups; g++) {
        int m = groups[g * gsize];
        for (int k = 0; k < gsize; k++)
            if (groups[g * gsize + k] < m)
                m = groups[g * gsize + k];
        for (int k = 0; k < gsize; k++) {
            assert_int_equal(rep[groups[g * gsize + k]], -1); /* a partition */
            rep[groups[g * gsize + k]] = m;
        }
    }
    for (int i = 0; i < w; i++)
        assert_true(rep[i] >= 0);
    return rep;
}

static void expect_groups(const p3d_placement *pl, unsigned mask, const int *groups, int ngroups, int gsize)
{
    int *a = reps_from_coords(pl, mask), *b = reps_from_lists(pl->world, groups, ngroups, gsize);
    for (int r = 0; r < pl->world; r++) {
        if (a[r] != b[r])
            fprintf(stderr, "mask %#x: rank %d grouped with %d, expected %d\n", mask, r, a[r], b[r]);
        assert_int_equal(a[r], b[r]);
    }
    free(a);
    free(b);
}

#define M(d) (1u << (d))

/* ---- Megatron's pre-RankGenerator loops (the test's golden function) --- */

typedef struct golden {
    int *tp, *pp, *dp, *cp, *dpcp, *mp; /* flat group lists */
    int ntp, npp, ndp, ncp, ndpcp, nmp;
} golden;

/* world, tp, pp, cp (the "cp" role is played by ep for expert groups) */
static void golden_make(golden *g, int world, int tp, int pp, int cp)
{
    int dp = world / (tp * pp * cp), npp = world / pp;
    memset(g, 0, sizeof *g);
    g->tp = malloc((size_t)world * sizeof(int));
    g->pp = malloc((size_t)world * sizeof(int));
    g->dp = malloc((size_t)world * sizeof(int));
    g->cp = malloc((size_t)world * sizeof(int));
    g->dpcp = malloc((size_t)world * sizeof(int));
    g->mp = malloc((size_t)world * sizeof(int));
    int k = 0;
    for (int i = 0; i < world / tp; i++, g->ntp++)
        for (int r = i * tp; r < (i + 1) * tp; r++)
            g->tp[k++] = r;
    k = 0;
    for (int i = 0; i < npp; i++, g->npp++)
        for (int r = i; r < world; r += npp)
            g->pp[k++] = r;
    int kd = 0, kc = 0;
    for (int i = 0; i < pp; i++) {
        int start = i * npp, end = (i + 1) * npp;
        for (int j = 0; j < cp * tp; j++, g->ndp++)
            for (int r = start + j; r < end; r += cp * tp)
                g->dp[kd++] = r;
        for (int j = 0; j < tp; j++, g->ndpcp++)
            for (int r = start + j; r < end; r += tp)
                g->dpcp[kc++] = r;
    }
    k = 0;
    for (int i = 0; i < pp; i++)
        for (int j = 0; j < dp; j++) {
            int start = i * npp + j * tp * cp, end = start + tp * cp;
            for (int t = 0; t < tp; t++, g->ncp++)
                for (int r = start + t; r < end; r += tp)
                    g->cp[k++] = r;
        }
    /* model-parallel group i = the i-th member of every dp-cp group */
    int gs = dp * cp;
    k = 0;
    for (int i = 0; i < gs; i++, g->nmp++)
        for (int j = 0; j < g->ndpcp; j++)
            g->mp[k++] = g->dpcp[j * gs + i];
}

static void golden_free(golden *g)
{
    free(g->tp);
    free(g->pp);
    free(g->dp);
    free(g->cp);
    free(g->dpcp);
    free(g->mp);
}

/* Physical rules every well-formed case must meet on 8-GPU nodes with one
 * domain each and one rack: TP group on one node, rank 0 on node 0, no
 * degradation notes, GPUs used by whole nodes (world multiple of 8). */
static void expect_physical(const p3d_cluster *c, const p3d_placement *pl)
{
    const p3d_mesh *m = &pl->mesh;
    int buf[64];
    assert_int_equal(pl->ranks[0].node, 0);
    for (int r = 0; r < pl->world; r++) {
        int n = p3d_group_members(m, P3D_DIM_TP, r, buf, 64);
        for (int k = 0; k < n; k++) {
            const p3d_rank *a = &pl->ranks[buf[k]], *b = &pl->ranks[r];
            assert_int_equal(a->node, b->node);
            assert_int_equal(c->nodes[a->node].topo->gpus[a->gpu].domain, c->nodes[b->node].topo->gpus[b->gpu].domain);
        }
    }
    /* EP blocks larger than a node may not fit (checked in megatron_case) */
    for (size_t i = 0; i < pl->nnotes; i++)
        if (!strstr(pl->notes[i], "EP rule degraded"))
            assert_null(strstr(pl->notes[i], "degraded"));
}

/* One parametrized case of test_rank_generator_for_tp_dp_pp. */
static void megatron_case(int nodes, int gpus, int tp, int pp, int cp, int ep)
{
    int world = nodes * gpus;
    p3d_cluster *c = fx_simple((size_t)nodes, gpus, gpus, 0);
    p3d_job j;
    golden g;

    fx_job(&j, tp, cp, 1, world / (tp * pp * cp), pp, "tp-cp-dp-pp");
    p3d_placement *pl = place("megatron", c, &j);
    expect_physical(c, pl);
    golden_make(&g, world, tp, pp, cp);
    expect_groups(pl, M(P3D_DIM_TP), g.tp, g.ntp, tp);
    expect_groups(pl, M(P3D_DIM_PP), g.pp, g.npp, pp);
    expect_groups(pl, M(P3D_DIM_DP), g.dp, g.ndp, world / (tp * pp * cp));
    expect_groups(pl, M(P3D_DIM_CP), g.cp, g.ncp, cp);
    expect_groups(pl, M(P3D_DIM_DP) | M(P3D_DIM_CP), g.dpcp, g.ndpcp, world / (tp * pp));
    expect_groups(pl, M(P3D_DIM_TP) | M(P3D_DIM_PP), g.mp, g.nmp, tp * pp);
    golden_free(&g);
    p3d_placement_free(pl);

    /* the expert generator: etp-ep-edp-pp (cp = 1 there), dp the dense dp */
    if (world % (tp * ep * pp) == 0) {
        int edp = world / (tp * ep * pp);
        fx_job(&j, tp, 1, ep, world / (tp * pp), pp, "tp-ep-dp-pp");
        pl = place("megatron", c, &j);
        expect_physical(c, pl);
        assert_int_equal(pl->mesh.size[P3D_DIM_EDP], edp);
        golden_make(&g, world, tp, pp, ep); /* ep plays cp's role */
        expect_groups(pl, M(P3D_DIM_EDP), g.dp, g.ndp, edp);
        expect_groups(pl, M(P3D_DIM_EP), g.cp, g.ncp, ep);
        golden_free(&g);
        golden_make(&g, world, tp * ep, pp, 1); /* tp-ep: contiguous blocks */
        expect_groups(pl, M(P3D_DIM_ETP) | M(P3D_DIM_EP), g.tp, g.ntp, tp * ep);
        /* the EP rule: an EP group that fits a node stays on one */
        assert_int_equal(has_note(pl, "EP rule degraded"), tp * ep > gpus);
        if (tp * ep <= gpus)
            for (int r = 0; r < world; r++) {
                int buf[64], n = p3d_group_members(&pl->mesh, P3D_DIM_EP, r, buf, 64);
                for (int k = 0; k < n; k++)
                    assert_int_equal(pl->ranks[buf[k]].node, pl->ranks[r].node);
            }
        golden_free(&g);
        p3d_placement_free(pl);
    }
    fx_free(c);
}

static const int megatron_params[][6] = {
    {1, 1, 1, 1, 1, 1},   {1, 8, 8, 1, 1, 1},   {1, 8, 2, 2, 1, 1},    {1, 8, 2, 4, 1, 1},    {3, 8, 8, 3, 1, 1},
    {4, 8, 2, 4, 1, 1},   {8, 8, 8, 8, 1, 1},   {8, 8, 2, 1, 1, 4},    {8, 8, 2, 2, 2, 4},    {8, 8, 2, 1, 4, 8},
    {8, 8, 2, 2, 2, 8},   {16, 8, 4, 8, 1, 1},  {16, 8, 4, 8, 1, 4},   {16, 8, 4, 8, 4, 1},   {16, 8, 8, 8, 1, 1},
    {16, 8, 4, 8, 1, 1},  {16, 8, 8, 8, 1, 1},  {32, 8, 4, 8, 1, 1},   {32, 8, 8, 8, 1, 1},   {32, 8, 4, 8, 1, 4},
    {32, 8, 8, 8, 4, 1},  {64, 8, 4, 2, 8, 8},  {64, 8, 4, 8, 1, 1},   {64, 8, 8, 8, 1, 1},   {96, 8, 4, 8, 1, 1},
    {128, 8, 4, 2, 8, 8}, {128, 8, 4, 8, 1, 1}, {256, 8, 4, 8, 1, 1},  {316, 8, 4, 8, 1, 1},  {384, 8, 4, 8, 1, 1},
    {512, 8, 4, 8, 1, 1}, {768, 8, 4, 8, 1, 1}, {1024, 8, 4, 8, 1, 1}, {1280, 8, 4, 8, 1, 1}, {1344, 8, 4, 8, 1, 1},
};

static void test_megatron_parametrized(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof megatron_params / sizeof *megatron_params; i++) {
        const int *p = megatron_params[i];
        megatron_case(p[0], p[1], p[2], p[3], p[4], p[5]);
    }
}

/* The literal lists of megatron_cases.md. */
static void test_megatron_literal_cases(void **state)
{
    (void)state;
    p3d_cluster *c1 = fx_simple(1, 8, 8, 0), *c2 = fx_simple(2, 8, 8, 0), *c3 = fx_simple(3, 8, 8, 0);
    p3d_job j;
    p3d_placement *pl;

    /* case 1: world 8, tp2 pp2 dp2 */
    fx_job(&j, 2, 1, 1, 2, 2, NULL);
    pl = place("megatron", c1, &j);
    static const int c1tp[] = {0, 1, 2, 3, 4, 5, 6, 7}, c1pp[] = {0, 4, 1, 5, 2, 6, 3, 7},
                     c1dp[] = {0, 2, 1, 3, 4, 6, 5, 7}, c1mp[] = {0, 1, 4, 5, 2, 3, 6, 7};
    expect_groups(pl, M(P3D_DIM_TP), c1tp, 4, 2);
    expect_groups(pl, M(P3D_DIM_PP), c1pp, 4, 2);
    expect_groups(pl, M(P3D_DIM_DP), c1dp, 4, 2);
    expect_groups(pl, M(P3D_DIM_TP) | M(P3D_DIM_PP), c1mp, 2, 4);
    p3d_placement_free(pl);

    /* case 3: the initialize_model_parallel docstring, 16 GPUs tp2 pp4 */
    fx_job(&j, 2, 1, 1, 2, 4, NULL);
    pl = place("megatron", c2, &j);
    static const int c3dp[] = {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15},
                     c3pp[] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15},
                     c3tp[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    expect_groups(pl, M(P3D_DIM_DP), c3dp, 8, 2);
    expect_groups(pl, M(P3D_DIM_PP), c3pp, 4, 4);
    expect_groups(pl, M(P3D_DIM_TP), c3tp, 8, 2);
    expect_physical(c2, pl);
    p3d_placement_free(pl);

    /* case 5: order tp-pp-dp changes the groups */
    fx_job(&j, 2, 1, 1, 2, 2, "tp-pp-dp");
    pl = place("megatron", c1, &j);
    static const int c5pp[] = {0, 2, 1, 3, 4, 6, 5, 7}, c5dp[] = {0, 4, 1, 5, 2, 6, 3, 7};
    expect_groups(pl, M(P3D_DIM_TP), c1tp, 4, 2);
    expect_groups(pl, M(P3D_DIM_PP), c5pp, 4, 2);
    expect_groups(pl, M(P3D_DIM_DP), c5dp, 4, 2);
    p3d_placement_free(pl);
    /* tp-dp-pp with sizes 2-3-4 (world 24) */
    fx_job(&j, 2, 1, 1, 3, 4, "tp-dp-pp");
    pl = place("megatron", c3, &j);
    static const int c5dp24[] = {0, 2, 4, 1, 3, 5, 6, 8, 10, 7, 9, 11, 12, 14, 16, 13, 15, 17, 18, 20, 22, 19, 21, 23};
    expect_groups(pl, M(P3D_DIM_DP), c5dp24, 8, 3);
    p3d_placement_free(pl);
    /* world 16, tp2 pp4 dp2, tp-pp-dp */
    fx_job(&j, 2, 1, 1, 2, 4, "tp-pp-dp");
    pl = place("megatron", c2, &j);
    static const int c5pp16[] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15},
                     c5dp16[] = {0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15};
    expect_groups(pl, M(P3D_DIM_PP), c5pp16, 4, 4);
    expect_groups(pl, M(P3D_DIM_DP), c5dp16, 8, 2);
    expect_physical(c2, pl);
    p3d_placement_free(pl);

    /* DeviceMesh (2, 4) ("DP", "TP") == tp-dp; (2,2,2) ("dp","pp","tp") == tp-pp-dp */
    fx_job(&j, 4, 1, 1, 2, 1, "tp-dp");
    pl = place("devicemesh", c1, &j);
    static const int dmtp[] = {0, 1, 2, 3, 4, 5, 6, 7}, dmdp[] = {0, 4, 1, 5, 2, 6, 3, 7};
    expect_groups(pl, M(P3D_DIM_TP), dmtp, 2, 4);
    expect_groups(pl, M(P3D_DIM_DP), dmdp, 4, 2);
    assert_true(has_note(pl, "init_device_mesh(\"cuda\", (2, 4), mesh_dim_names=(\"dp\", \"tp\"))"));
    p3d_placement_free(pl);
    fx_job(&j, 2, 1, 1, 2, 2, "tp-pp-dp");
    pl = place("devicemesh", c1, &j);
    expect_groups(pl, M(P3D_DIM_TP), c1tp, 4, 2);
    expect_groups(pl, M(P3D_DIM_PP), c5pp, 4, 2);
    expect_groups(pl, M(P3D_DIM_DP), c5dp, 4, 2);
    assert_true(has_note(pl, "(2, 2, 2), mesh_dim_names=(\"dp\", \"pp\", \"tp\")"));
    p3d_placement_free(pl);
    fx_free(c1);
    fx_free(c2);
    fx_free(c3);
}

/* Racks: how many PP groups span more than one rack. */
static int pipelines_crossing_racks(const p3d_cluster *c, const p3d_placement *pl)
{
    int buf[256], crossing = 0;
    for (int r = 0; r < pl->world; r++) {
        int n = p3d_group_members(&pl->mesh, P3D_DIM_PP, r, buf, 256);
        if (buf[0] != r)
            continue;
        for (int k = 1; k < n; k++)
            if (c->nodes[pl->ranks[buf[k]].node].rack != c->nodes[pl->ranks[r].node].rack) {
                crossing++;
                break;
            }
    }
    return crossing;
}

/* DOMAIN.md's worked examples. */
static void test_worked_examples(void **state)
{
    (void)state;
    p3d_job j;
    /* 175B: tp=8 pp=16 dp=4 on 64 nodes in 4 racks of 16 */
    p3d_cluster *c = fx_simple(64, 8, 8, 16);
    fx_job(&j, 8, 1, 1, 4, 16, NULL);
    p3d_placement *pl = place("megatron", c, &j);
    expect_physical(c, pl);
    assert_int_equal(pipelines_crossing_racks(c, pl), 0);
    /* consecutive stages on adjacent nodes */
    for (int r = 0; r < pl->world; r++)
        if (pl->ranks[r].coord[P3D_DIM_PP] > 0) {
            int c0[P3D_NDIMS];
            memcpy(c0, pl->ranks[r].coord, sizeof c0);
            c0[P3D_DIM_PP]--;
            int prev = p3d_mesh_rank(&pl->mesh, c0);
            assert_int_equal(pl->ranks[r].node - pl->ranks[prev].node, 1);
        }
    assert_int_equal((int)pl->nnotes, 0);
    p3d_placement_free(pl);
    /* naive on the same: every pipeline crosses racks */
    pl = place("naive", c, &j);
    assert_int_equal(pipelines_crossing_racks(c, pl), 64 / 16 * 8 * 4 / 4);
    p3d_placement_free(pl);
    /* tp=8 pp=4 dp=16 = 512 GPUs */
    fx_job(&j, 8, 1, 1, 16, 4, NULL);
    pl = place("megatron", c, &j);
    expect_physical(c, pl);
    assert_int_equal(pipelines_crossing_racks(c, pl), 0);
    p3d_placement_free(pl);
    fx_free(c);
    /* 70B: tp=8 pp=2 on 2 nodes */
    c = fx_simple(2, 8, 8, 0);
    fx_job(&j, 8, 1, 1, 1, 2, NULL);
    pl = place("megatron", c, &j);
    expect_physical(c, pl);
    assert_int_equal(pl->ranks[8].node, 1);
    p3d_placement_free(pl);
    fx_free(c);
}

/* Slurm's alphabetical list interleaves two racks: naive puts pipelines
 * across racks, megatron does not. */
static void test_interleaved_racks(void **state)
{
    (void)state;
    p3d_node *t = fx_topo(8, 8);
    int rack[16];
    for (int i = 0; i < 16; i++)
        rack[i] = i % 2;
    p3d_cluster *c = fx_cluster(16, &t, 1, NULL, rack, 2, NULL, 0);
    p3d_job j;
    fx_job(&j, 8, 1, 1, 4, 4, NULL);
    p3d_placement *pl = place("megatron", c, &j);
    expect_physical(c, pl);
    assert_int_equal(pipelines_crossing_racks(c, pl), 0);
    p3d_placement_free(pl);
    /* with the default order naive's pipeline stride (4 nodes) happens to
     * keep parity; Megatron's --use-tp-pp-dp-mapping order does not */
    fx_job(&j, 8, 1, 1, 4, 4, "tp-cp-ep-pp-dp");
    pl = place("megatron", c, &j);
    expect_physical(c, pl);
    assert_int_equal(pipelines_crossing_racks(c, pl), 0);
    p3d_placement_free(pl);
    pl = place("naive", c, &j);
    assert_int_equal(pipelines_crossing_racks(c, pl), 32);
    for (int r = 0; r < pl->world; r++) {
        assert_int_equal(pl->ranks[r].node, r / 8);
        assert_int_equal(pl->ranks[r].gpu, r % 8);
    }
    p3d_placement_free(pl);
    fx_free(c);
}

/* When the hardware cannot satisfy a rule: next best, and a note. */
static void test_degradations(void **state)
{
    (void)state;
    p3d_job j;
    p3d_placement *pl;
    /* world < GPUs: whole nodes first */
    p3d_cluster *c = fx_simple(4, 8, 8, 0);
    fx_job(&j, 4, 1, 1, 2, 1, NULL);
    pl = place("megatron", c, &j);
    for (int r = 0; r < 8; r++)
        assert_int_equal(pl->ranks[r].node, 0);
    p3d_placement_free(pl);
    /* tp=3 on 8-GPU domains: 2 per node idle while enough room... */
    fx_job(&j, 3, 1, 1, 8, 1, NULL);
    pl = place("megatron", c, &j);
    expect_physical(c, pl);
    assert_false(has_note(pl, "degraded"));
    p3d_placement_free(pl);
    /* ...then 2 groups across nodes, said so */
    fx_job(&j, 3, 1, 1, 10, 1, NULL);
    pl = place("megatron", c, &j);
    assert_true(has_note(pl, "TP rule degraded: 2 of 10 TP groups span nodes"));
    p3d_placement_free(pl);
    fx_free(c);

    /* PCIe node with NVLink pairs: tp=4 spans domains inside the node */
    c = fx_simple(2, 8, 2, 0);
    fx_job(&j, 4, 1, 1, 4, 1, NULL);
    pl = place("megatron", c, &j);
    assert_true(has_note(pl, "TP rule degraded: 4 of 4 TP groups span several NVLink domains of one node"));
    for (int r = 0; r < 16; r += 4)
        assert_int_equal(pl->ranks[r].node, pl->ranks[r + 3].node);
    p3d_placement_free(pl);
    /* tp=2 fits the pairs: no note */
    fx_job(&j, 2, 1, 1, 8, 1, NULL);
    pl = place("megatron", c, &j);
    expect_physical(c, pl);
    p3d_placement_free(pl);
    fx_free(c);

    /* uneven racks 3 + 5 nodes, pipelines of 2 nodes: one must cross */
    c = fx_simple(8, 8, 8, 0);
    for (int i = 0; i < 8; i++)
        c->nodes[i].rack = i < 3 ? 0 : 1;
    free(c->racks[0]);
    free(c->racks);
    c->nracks = 2;
    c->racks = calloc(2, sizeof *c->racks);
    c->racks[0] = strdup("ra");
    c->racks[1] = strdup("rb");
    fx_job(&j, 8, 1, 1, 4, 2, NULL);
    pl = place("megatron", c, &j);
    assert_int_equal(pipelines_crossing_racks(c, pl), 8);
    assert_true(has_note(pl, "pipeline rule degraded: 1 of 4 pipeline blocks (tp x pp ranks each) span racks"));
    assert_int_equal(pl->ranks[0].node, 0);
    p3d_placement_free(pl);
    fx_free(c);

    /* GB200-like: 4-GPU trays, 4 trays per multi-node domain; tp=8 spans
     * 2 trays of one domain, tp=4 stays on a tray */
    p3d_node *t = fx_topo(4, 4);
    int nvl[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    c = fx_cluster(8, &t, 1, NULL, NULL, 1, nvl, 2);
    fx_job(&j, 8, 1, 1, 4, 1, NULL);
    pl = place("megatron", c, &j);
    assert_true(has_note(pl, "span nodes inside a multi-node NVLink domain"));
    assert_false(has_note(pl, "degraded"));
    for (int r = 0; r < 32; r += 8) {
        int a = pl->ranks[r].node, b = pl->ranks[r + 7].node;
        assert_int_equal(c->nodes[a].nvl_domain, c->nodes[b].nvl_domain);
    }
    p3d_placement_free(pl);
    fx_job(&j, 4, 1, 1, 8, 1, NULL);
    pl = place("megatron", c, &j);
    expect_physical(c, pl);
    p3d_placement_free(pl);
    fx_free(c);

    /* heterogeneous nodes: 8-GPU and 4-GPU nodes, tp=4 pp=2 */
    p3d_node *ts[2] = {fx_topo(8, 8), fx_topo(4, 4)};
    int topo_of[4] = {0, 1, 0, 1};
    c = fx_cluster(4, ts, 2, topo_of, NULL, 1, NULL, 0);
    fx_job(&j, 4, 1, 1, 3, 2, NULL);
    pl = place("megatron", c, &j);
    expect_physical(c, pl);
    p3d_placement_free(pl);
    fx_free(c);
}

/* ~200 random meshes, order strings and clusters (fixed seed). */
static unsigned rng = 12345;
static int rnd(int n)
{
    rng = rng * 1103515245u + 12345u;
    return (int)((rng >> 16) % (unsigned)n);
}

static void test_property_random(void **state)
{
    (void)state;
    static const char *const dims[] = {"tp", "cp", "ep", "dp", "pp"};
    int done = 0;
    for (int iter = 0; done < 200 && iter < 5000; iter++) {
        int g = rnd(2) ? 8 : 4, dsz = rnd(3) ? g : g / 2;
        int nodes = 1 + rnd(12), nracks = 1 + rnd(3);
        int tp = 1 << rnd(4), cp = 1 + rnd(2), ep = 1 << rnd(3), pp = 1 + rnd(4), dp = 1 + rnd(4);
        int etp = rnd(3) ? tp : 1 << rnd(3);
        int world = tp * cp * pp * dp;
        if (world > nodes * g || world % (etp * ep * pp))
            continue;
        char order[32] = "";
        int perm[5] = {0, 1, 2, 3, 4};
        for (int i = 4; i > 0; i--) {
            int k = rnd(i + 1), tmp = perm[i];
            perm[i] = perm[k];
            perm[k] = tmp;
        }
        int len = 1 + rnd(5);
        for (int i = 0; i < len; i++) {
            if (i)
                strcat(order, "-");
            strcat(order, dims[perm[i]]);
        }
        p3d_node *t = fx_topo(g, dsz);
        int rack[12];
        for (int i = 0; i < nodes; i++)
            rack[i] = rnd(nracks);
        p3d_cluster *c = fx_cluster((size_t)nodes, &t, 1, NULL, rack, (size_t)nracks, NULL, 0);
        p3d_job j;
        fx_job(&j, tp, cp, ep, dp, pp, order);
        j.mesh.size[P3D_DIM_ETP] = etp;
        char *why = NULL;
        p3d_mesh rm = j.mesh;
        if (p3d_mesh_resolve(&rm, &why) < 0) { /* Megatron refuses it: so must the policy run */
            p3d_placement *no = NULL;
            char *msg = NULL;
            assert_int_equal(p3d_policy_run("megatron", NULL, c, &j, &no, &msg), -1);
            assert_string_equal(msg, why);
            free(msg);
            free(why);
            fx_free(c);
            continue;
        }
        p3d_placement *pl = place(rnd(4) ? "megatron" : "devicemesh", c, &j);
        /* bijection onto existing GPUs */
        int used[12 * 8] = {0};
        for (int r = 0; r < world; r++) {
            const p3d_rank *R = &pl->ranks[r];
            assert_true(R->node >= 0 && R->node < nodes && R->gpu >= 0 && R->gpu < g);
            assert_int_equal(used[R->node * 8 + R->gpu]++, 0);
            assert_int_equal(p3d_mesh_rank(&j.mesh, R->coord), r);
        }
        /* groups from coordinates == p3d_group_members, for every dim */
        for (int d = 0; d < P3D_NDIMS; d++) {
            int *rep = reps_from_coords(pl, 1u << d), buf[16];
            for (int r = 0; r < world; r++) {
                int n = p3d_group_members(&j.mesh, d, r, buf, 16);
                assert_int_equal(n, p3d_mesh_size(&j.mesh, d));
                assert_int_equal(n, pl->mesh.size[d]);
                assert_int_equal(rep[r], buf[0]);
            }
            free(rep);
        }
        /* TP inside one domain when enough domains have room; notes honest */
        int units = nodes * (g / dsz) * (dsz / tp);
        if (tp <= dsz && units * tp >= world)
            assert_false(has_note(pl, "TP rule degraded"));
        if (pl->ranks[0].node != 0)
            assert_true(has_note(pl, "rank 0 is on"));
        if (!has_note(pl, "TP rule degraded")) {
            for (int r = 0; r < world; r++) {
                int buf[16], n = p3d_group_members(&j.mesh, P3D_DIM_TP, r, buf, 16);
                for (int k = 0; k < n; k++) {
                    const p3d_rank *a = &pl->ranks[buf[k]], *b = &pl->ranks[r];
                    assert_int_equal(a->node, b->node);
                    assert_int_equal(t->gpus[a->gpu].domain, t->gpus[b->gpu].domain);
                }
            }
        }
        if (!has_note(pl, "pipeline rule degraded") && !has_note(pl, "TP rule degraded") &&
            !has_note(pl, "EP rule degraded") && !has_note(pl, "EP pipeline block rule degraded") &&
            !has_note(pl, "EP block rule degraded"))
            assert_int_equal(pipelines_crossing_racks(c, pl), 0);
        p3d_placement_free(pl);
        fx_free(c);
        done++;
    }
    assert_int_equal(done, 200);
}

/* The meshes of issue #31 that PyTorch's init_device_mesh accepts and
 * Megatron's initialize_model_parallel refuses (no EP asked, so DeviceMesh
 * has no expert grid): devicemesh places them with the order string's
 * arithmetic, megatron still refuses them with Megatron's words, and a
 * policy file declaring `follows` gets the rules it names. */
static void test_devicemesh_rules(void **state)
{
    (void)state;
    static const struct {
        int tp, cp, dp, pp;
        const char *order, *megatron_says;
    } cases[] = {
        {1, 8, 1, 1, "cp", "leaves out dp (edp=8)"},
        {8, 4, 1, 1, "tp-cp", "leaves out dp (edp=4)"},
        {8, 4, 1, 2, "tp-cp-pp", "leaves out dp (edp=4)"},
        {8, 2, 4, 2, "tp-cp-pp-dp", "edp=8 differs from dp=4"},
    };
    p3d_cluster *c = fx_simple(16, 8, 8, 2);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        p3d_job j;
        fx_job(&j, cases[i].tp, cases[i].cp, 1, cases[i].dp, cases[i].pp, cases[i].order);
        p3d_placement *no = NULL;
        char *msg = NULL;
        assert_int_equal(p3d_policy_run("megatron", NULL, c, &j, &no, &msg), -1);
        assert_non_null(strstr(msg, cases[i].megatron_says));
        free(msg);
        msg = NULL;
        p3d_placement *pl = place("devicemesh", c, &j);
        assert_int_equal(pl->mesh.rules, P3D_RULES_DEVICEMESH);
        int world = p3d_mesh_world(&pl->mesh);
        for (int r = 0; r < world; r++)
            assert_int_equal(p3d_mesh_rank(&pl->mesh, pl->ranks[r].coord), r);
        p3d_analysis *an = NULL;
        assert_int_equal(p3d_analyze(c, &j, pl, &an, &msg), 0);
        p3d_analysis_free(an);
        p3d_placement_free(pl);
    }
    /* a dimension of size > 1 the order string leaves out is a mesh
     * dimension nobody named: refused under DeviceMesh's rules too */
    p3d_job j;
    fx_job(&j, 8, 4, 1, 2, 1, "tp-cp");
    p3d_placement *no = NULL;
    char *msg = NULL;
    assert_int_equal(p3d_policy_run("devicemesh", NULL, c, &j, &no, &msg), -1);
    assert_non_null(strstr(msg, "leaves out dp (size 2): the order string names the DeviceMesh's dimensions"));
    free(msg);
    msg = NULL;
    /* a policy's declaration decides; a wrong one is named */
    static const char body[] = "function place(c, j) local r = {} for i = 0, j.world - 1 do "
                               "r[#r + 1] = {rank = i, node = c.nodes[1].name, gpu = i} end return r end";
    char text[512];
    fx_job(&j, 1, 8, 1, 1, 1, "cp");
    snprintf(text, sizeof text, "follows = \"devicemesh\"\n%s", body);
    assert_int_equal(p3d_policy_run_text("t.lua", NULL, text, strlen(text), c, &j, NULL, &no, &msg), 0);
    assert_int_equal(no->mesh.rules, P3D_RULES_DEVICEMESH);
    p3d_placement_free(no);
    no = NULL;
    assert_int_equal(p3d_policy_run_text("t.lua", NULL, body, strlen(body), c, &j, NULL, &no, &msg), -1);
    assert_non_null(strstr(msg, "Megatron requires every dimension"));
    free(msg);
    msg = NULL;
    snprintf(text, sizeof text, "follows = \"torch\"\n%s", body);
    assert_int_equal(p3d_policy_run_text("t.lua", NULL, text, strlen(text), c, &j, NULL, &no, &msg), -1);
    assert_string_equal(msg, "t.lua: follows = 'torch': expected \"megatron\" (Megatron-LM's order-string rules) "
                             "or \"devicemesh\" (PyTorch DeviceMesh's)");
    free(msg);
    msg = NULL;
    fx_free(c);
}

/* 16,384 nodes x 8 GPUs: tables and megatron.lua stay fast. Prints the
 * figures; the bound only catches a blow-up (quadratic), not slowness. */
static void test_scale(void **state)
{
    (void)state;
    p3d_cluster *c = fx_simple(16384, 8, 8, 32);
    p3d_job j;
    fx_job(&j, 8, 1, 1, 1024, 16, NULL);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    p3d_placement *pl = place("megatron", c, &j);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
    unsigned long long ins;
    size_t peak;
    p3d_policy_last_stats(&ins, &peak);
    printf("megatron.lua, 131072 GPUs: %.3f s, %llu Lua instructions, peak Lua heap %zu MiB\n", s, ins, peak >> 20);
    assert_int_equal(pipelines_crossing_racks(c, pl), 0);
    p3d_placement_free(pl);
    fx_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_megatron_literal_cases),
        cmocka_unit_test(test_megatron_parametrized),
        cmocka_unit_test(test_worked_examples),
        cmocka_unit_test(test_interleaved_racks),
        cmocka_unit_test(test_degradations),
        cmocka_unit_test(test_property_random),
        cmocka_unit_test(test_scale),
        cmocka_unit_test(test_devicemesh_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
