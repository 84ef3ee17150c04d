/* SPDX-License-Identifier: BSD-3-Clause */
/* test_elastic.c — p3d/elastic.h: the widths of an elastic job and the
 * global batch at each (placement/mesh/width.c), and the shrink, the grow
 * and their check (placement/policy/reshape*.c) on a real cluster file
 * (16 DGX H100 in two racks, the bundled megatron policy). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "p3d/p3d.h"

static p3d_mesh mesh_of(int tp, int pp, int dp)
{
    p3d_job j;
    p3d_job_init(&j);
    j.mesh.size[P3D_DIM_TP] = tp, j.mesh.size[P3D_DIM_PP] = pp, j.mesh.size[P3D_DIM_DP] = dp;
    assert_int_equal(p3d_mesh_resolve(&j.mesh, NULL), 0);
    return j.mesh;
}

/* B = 16, b = 1: 4 and 2 and 1 divide it, 3 does not (16/3: m 5, batch 15). */
static void widths_and_batch(void **state)
{
    (void)state;
    p3d_mesh m = mesh_of(2, 2, 4);
    p3d_elastic e = {.full_dp = 4, .min_dp = 1, .B = 16, .b = 1};
    p3d_width w;
    p3d_width_at(&e, &m, 4, &w);
    assert_true(w.valid && w.exact);
    assert_int_equal(w.m, 4);
    assert_int_equal(w.world, 16);
    p3d_width_at(&e, &m, 3, &w);
    assert_false(w.valid);
    assert_int_equal(w.m, 5);
    assert_int_equal(w.batch, 15);
    assert_non_null(strstr(w.note, "does not divide 16"));
    /* three replicas left: exact 2 wins over inexact 3 */
    assert_int_equal(p3d_width_choose(&e, &m, 3, &w), 0);
    assert_int_equal(w.dp, 2);
    assert_int_equal(w.m, 8);
    /* with D = 3 only 3 is in range: refused at 0%, taken within 10% */
    e.min_dp = 3;
    assert_int_equal(p3d_width_choose(&e, &m, 3, &w), -1);
    e.tol_pct = 10;
    assert_int_equal(p3d_width_choose(&e, &m, 3, &w), 0);
    assert_int_equal(w.dp, 3);
    assert_false(w.exact);
    assert_non_null(strstr(w.note, "within --batch-tolerance"));
    /* no batch: every width the mesh takes */
    e.B = 0;
    p3d_width_at(&e, &m, 3, &w);
    assert_true(w.valid);
    assert_int_equal(w.m, 0);
}

/* The expert grid: tp 1, ep 4 needs tp*cp*dp divisible by etp*ep = 4. */
static void widths_expert_grid(void **state)
{
    (void)state;
    p3d_job j;
    p3d_job_init(&j);
    j.mesh.size[P3D_DIM_EP] = 4, j.mesh.size[P3D_DIM_DP] = 8;
    assert_int_equal(p3d_mesh_resolve(&j.mesh, NULL), 0);
    p3d_elastic e = {.full_dp = 8, .min_dp = 1, .b = 1};
    p3d_width w;
    p3d_width_at(&e, &j.mesh, 6, &w);
    assert_false(w.valid);
    assert_non_null(strstr(w.note, "mesh"));
    assert_int_equal(p3d_width_choose(&e, &j.mesh, 7, &w), 0);
    assert_int_equal(w.dp, 4);
}

static void init_refusals(void **state)
{
    (void)state;
    p3d_job j;
    p3d_elastic e;
    char *err = NULL;
    p3d_job_init(&j);
    j.mesh.size[P3D_DIM_DP] = 4;
    assert_int_equal(p3d_mesh_resolve(&j.mesh, NULL), 0);
    assert_int_equal(p3d_elastic_init(&j, 5, 0, &e, &err), -1);
    assert_non_null(strstr(err, "--min-dp 5 is larger"));
    P3D_FREE(&err);
    j.global_batch = 10; /* 4 does not divide it */
    assert_int_equal(p3d_elastic_init(&j, 2, 0, &e, &err), -1);
    assert_non_null(strstr(err, "full width dp 4"));
    P3D_FREE(&err);
    assert_int_equal(p3d_elastic_init(&j, 2, 25, &e, &err), 0); /* 8 or 12: 20% off */
    j.global_batch = 12, j.micro_batches = 2;                   /* b = 12 / (4 * 2) is no whole number */
    assert_int_equal(p3d_elastic_init(&j, 2, 0, &e, &err), -1);
    assert_non_null(strstr(err, "no micro-batch size follows"));
    P3D_FREE(&err);
    j.global_batch = 16, j.micro_batches = 2; /* b 2; 3 and 2 replicas: only 2 divides */
    assert_int_equal(p3d_elastic_init(&j, 2, 0, &e, &err), 0);
    assert_int_equal(e.b, 2);
    j.global_batch = 8, j.micro_batches = 0, j.micro_batch_size = 2; /* dp 3 x 2 never divides 8 */
    assert_int_equal(p3d_elastic_init(&j, 3, 0, &e, &err), -1);
    assert_non_null(strstr(err, "could never shrink"));
    P3D_FREE(&err);
    j.micro_batches = 3; /* 8 / (4 x 2) = 1, not 3 */
    assert_int_equal(p3d_elastic_init(&j, 4, 0, &e, &err), -1);
    assert_non_null(strstr(err, "--micro-batches 3 disagrees"));
    P3D_FREE(&err);
}

static void nnodes_range(void **state)
{
    (void)state;
    int d = 0;
    char *err = NULL;
    assert_int_equal(p3d_elastic_min_dp_of_nodes(3, 4, 8, &d, &err), 0);
    assert_int_equal(d, 6);
    assert_int_equal(p3d_elastic_min_dp_of_nodes(3, 16, 4, &d, &err), -1); /* 3 nodes: 0.75 replicas */
    assert_non_null(strstr(err, "hold no whole data-parallel replica"));
    P3D_FREE(&err);
}

/* ------------------------------------------------------------------ */

typedef struct fx {
    p3d_cluster *c;
    p3d_placement *pl;
} fx;

/* 16 DGX H100 (8 GPUs, one NVLink domain each), racks r1 = node01-08 and
 * r2 = node09-16; tp 8 pp 2 dp 7: the megatron policy puts each replica's
 * two stages on two nodes of one rack and leaves two nodes unused. */
static void load(fx *f, int dp)
{
    char *err = NULL, path[512];
    const char *fixtures = getenv("P3D_FIXTURES");
    snprintf(path, sizeof path, "%s/clusters/plan-16x-dgx-h100-2racks.json", fixtures ? fixtures : "fixtures");
    if (p3d_cluster_load(path, &f->c, &err) < 0)
        fail_msg("%s", err);
    p3d_job j;
    p3d_job_init(&j);
    j.mesh.size[P3D_DIM_TP] = 8, j.mesh.size[P3D_DIM_PP] = 2, j.mesh.size[P3D_DIM_DP] = dp;
    assert_int_equal(p3d_mesh_resolve(&j.mesh, NULL), 0);
    if (p3d_policy_run("megatron", NULL, f->c, &j, &f->pl, &err) < 0)
        fail_msg("%s", err);
}

static void unload(fx *f)
{
    p3d_placement_free(f->pl);
    p3d_cluster_free(f->c);
}

/* Every GPU of the new placement ran the same (tp, cp, pp) before, and
 * the same ep (whole expert-grid blocks are kept). */
static void assert_coords_kept(const p3d_placement *old, const p3d_placement *neu)
{
    for (int r = 0; r < neu->world; r++) {
        const p3d_rank *k = &neu->ranks[r];
        int found = 0;
        for (int q = 0; q < old->world; q++) {
            const p3d_rank *o = &old->ranks[q];
            if (o->node == k->node && o->gpu == k->gpu) {
                found = 1;
                assert_int_equal(o->coord[P3D_DIM_TP], k->coord[P3D_DIM_TP]);
                assert_int_equal(o->coord[P3D_DIM_PP], k->coord[P3D_DIM_PP]);
                assert_int_equal(o->coord[P3D_DIM_CP], k->coord[P3D_DIM_CP]);
                assert_int_equal(o->coord[P3D_DIM_EP], k->coord[P3D_DIM_EP]);
            }
        }
        assert_true(found);
    }
}

static int node_of_rank(const fx *f, int dp, int pp)
{
    int coord[P3D_NDIMS] = {0};
    coord[P3D_DIM_DP] = dp, coord[P3D_DIM_PP] = pp;
    return f->pl->ranks[p3d_mesh_rank(&f->pl->mesh, coord)].node;
}

/* One node lost: its replica goes, the six others keep their GPUs. */
static void shrink_one_node(void **state)
{
    (void)state;
    fx f;
    load(&f, 7);
    p3d_elastic e = {.full_dp = 7, .min_dp = 2, .b = 1, .B = 42};
    p3d_gpuref lost[] = {{node_of_rank(&f, 2, 1), -1}};
    p3d_reshape r;
    char *err = NULL;
    if (p3d_shrink_plan(f.c, f.pl, &e, lost, 1, &r, &err) < 0)
        fail_msg("%s", err);
    assert_int_equal(r.width.dp, 6);
    assert_int_equal(r.width.m, 7); /* 42 / 6 */
    assert_int_equal(r.pl->world, 96);
    assert_int_equal(r.ndropped, 1);
    assert_int_equal(r.dropped[0], 2);
    assert_int_equal(r.from[2], 3); /* old replica 3 is now 2: only dp renumbers */
    assert_coords_kept(f.pl, r.pl);
    if (p3d_reshape_check(f.c, f.pl, r.pl, &e, lost, 1, &err) < 0)
        fail_msg("%s", err);
    p3d_reshape_free(&r);
    unload(&f);
}

/* Two replicas each lose a stage, in one rack: stage 0 of one and stage
 * 1 of the other make a replica again (B 0: no batch to keep). */
static void shrink_assembles(void **state)
{
    (void)state;
    fx f;
    load(&f, 7);
    p3d_elastic e = {.full_dp = 7, .min_dp = 1, .b = 1};
    assert_int_equal(f.c->nodes[node_of_rank(&f, 0, 1)].rack, f.c->nodes[node_of_rank(&f, 1, 0)].rack);
    p3d_gpuref lost[] = {{node_of_rank(&f, 0, 1), 3}, {node_of_rank(&f, 1, 0), -1}};
    p3d_reshape r;
    char *err = NULL;
    if (p3d_shrink_plan(f.c, f.pl, &e, lost, 2, &r, &err) < 0)
        fail_msg("%s", err);
    assert_int_equal(r.width.dp, 6);
    assert_int_equal(r.from[5], -1);
    assert_int_equal(r.ndropped, 2);
    assert_coords_kept(f.pl, r.pl);
    if (p3d_reshape_check(f.c, f.pl, r.pl, &e, lost, 2, &err) < 0)
        fail_msg("%s", err);
    p3d_reshape_free(&r);
    unload(&f);
}

/* Below D: the message names D, the replicas left and what was lost. */
static void shrink_below_min(void **state)
{
    (void)state;
    fx f;
    load(&f, 7);
    p3d_elastic e = {.full_dp = 7, .min_dp = 7, .b = 1};
    p3d_gpuref lost[] = {{node_of_rank(&f, 4, 0), -1}};
    p3d_reshape r;
    char *err = NULL;
    assert_int_equal(p3d_shrink_plan(f.c, f.pl, &e, lost, 1, &r, &err), -1);
    assert_non_null(strstr(err, "6 whole data-parallel replicas of 7 left"));
    assert_non_null(strstr(err, "--min-dp is 7"));
    assert_non_null(strstr(err, f.c->nodes[lost[0].node].name));
    assert_null(r.pl);
    P3D_FREE(&err);
    unload(&f);
}

/* Lose a node, shrink, then the two unused nodes of r2 and the lost
 * replica's idle half are spares: the grow takes back one whole replica in
 * one rack, keeps every running GPU where it was. */
static void grow_back(void **state)
{
    (void)state;
    fx f;
    load(&f, 7);
    p3d_elastic e = {.full_dp = 7, .min_dp = 1, .b = 2, .B = 84};
    int gone = node_of_rank(&f, 2, 1), idle = node_of_rank(&f, 2, 0);
    p3d_gpuref lost[] = {{gone, -1}};
    p3d_reshape s, g;
    char *err = NULL;
    if (p3d_shrink_plan(f.c, f.pl, &e, lost, 1, &s, &err) < 0)
        fail_msg("%s", err);
    /* nothing to grow into yet */
    f.c->nodes[gone].role = P3D_NODE_LOST;
    assert_int_equal(p3d_grow_plan(f.c, s.pl, &e, &g, &err), 0);
    assert_int_equal(g.width.dp, 6);
    assert_null(g.pl);
    p3d_reshape_free(&g);
    /* one idle node alone holds half a replica: still nothing */
    f.c->nodes[idle].role = P3D_NODE_SPARE;
    assert_int_equal(p3d_grow_plan(f.c, s.pl, &e, &g, &err), 0);
    assert_null(g.pl);
    p3d_reshape_free(&g);
    int used[16] = {0};
    for (int q = 0; q < f.pl->world; q++)
        used[f.pl->ranks[q].node] = 1;
    for (int i = 0; i < 16; i++)
        if (!used[i])
            f.c->nodes[i].role = P3D_NODE_SPARE;
    if (p3d_grow_plan(f.c, s.pl, &e, &g, &err) < 0)
        fail_msg("%s", err);
    assert_int_equal(g.width.dp, 7);
    assert_int_equal(g.width.m, 6);
    assert_int_equal(g.from[6], -1);
    for (int r = 0; r < s.pl->world; r++) { /* the running ranks stay put */
        int found = 0;
        for (int q = 0; q < g.pl->world; q++)
            found |= g.pl->ranks[q].node == s.pl->ranks[r].node && g.pl->ranks[q].gpu == s.pl->ranks[r].gpu &&
                     g.pl->ranks[q].coord[P3D_DIM_DP] == s.pl->ranks[r].coord[P3D_DIM_DP];
        assert_true(found);
    }
    if (p3d_reshape_check(f.c, s.pl, g.pl, &e, lost, 1, &err) < 0)
        fail_msg("%s", err);
    p3d_reshape_free(&g);
    p3d_reshape_free(&s);
    unload(&f);
}

/* What a policy might get wrong, each refused with the rank and the rule. */
static void check_refuses(void **state)
{
    (void)state;
    fx f;
    load(&f, 7);
    p3d_elastic e = {.full_dp = 7, .min_dp = 1, .b = 1};
    p3d_gpuref lost[] = {{node_of_rank(&f, 6, 0), -1}};
    p3d_reshape r;
    char *err = NULL;
    assert_int_equal(p3d_shrink_plan(f.c, f.pl, &e, lost, 1, &r, &err), 0);
    p3d_rank keep = r.pl->ranks[1];
    r.pl->ranks[1].gpu = r.pl->ranks[0].gpu; /* one GPU twice */
    assert_int_equal(p3d_reshape_check(f.c, f.pl, r.pl, &e, lost, 1, &err), -1);
    assert_non_null(strstr(err, "already runs another rank"));
    P3D_FREE(&err);
    r.pl->ranks[1] = keep;
    keep = r.pl->ranks[5];
    r.pl->ranks[5].node = lost[0].node; /* a lost GPU */
    assert_int_equal(p3d_reshape_check(f.c, f.pl, r.pl, &e, lost, 1, &err), -1);
    assert_non_null(strstr(err, "is lost"));
    P3D_FREE(&err);
    r.pl->ranks[5] = keep;
    /* a TP group split over two nodes: swap GPUs of ranks 1 and 8 (tp 1 of
     * two TP groups on different nodes) */
    int n1 = r.pl->ranks[1].node, g1 = r.pl->ranks[1].gpu;
    r.pl->ranks[1].node = r.pl->ranks[8].node, r.pl->ranks[1].gpu = r.pl->ranks[8].gpu;
    r.pl->ranks[8].node = n1, r.pl->ranks[8].gpu = g1;
    assert_int_equal(p3d_reshape_check(f.c, f.pl, r.pl, &e, lost, 1, &err), -1);
    assert_non_null(strstr(err, "leaves its NVLink domain"));
    P3D_FREE(&err);
    r.pl->mesh.size[P3D_DIM_TP] = 4; /* geometry changed */
    assert_int_equal(p3d_reshape_check(f.c, f.pl, r.pl, &e, lost, 1, &err), -1);
    assert_non_null(strstr(err, "only dp may change"));
    P3D_FREE(&err);
    p3d_reshape_free(&r);
    unload(&f);
}

/* MoE (tp 1, ep 8: the expert grid needs dp a multiple of 8): one lost
 * GPU of 128 replicas leaves 127 whole ones, and the largest width the
 * expert grid takes is 120: the lost GPU's block of 8 replicas goes as a
 * whole, so every survivor keeps its tp, pp and ep coordinates (its
 * experts), and the placement passes the check. */
static void shrink_expert_grid(void **state)
{
    (void)state;
    fx f;
    char path[512], *err = NULL;
    snprintf(path, sizeof path, "%s/clusters/plan-16x-dgx-h100-2racks.json",
             getenv("P3D_FIXTURES") ? getenv("P3D_FIXTURES") : "fixtures");
    if (p3d_cluster_load(path, &f.c, &err) < 0)
        fail_msg("%s", err);
    p3d_job j;
    p3d_job_init(&j);
    j.mesh.size[P3D_DIM_EP] = 8, j.mesh.size[P3D_DIM_DP] = 128;
    assert_int_equal(p3d_mesh_resolve(&j.mesh, NULL), 0);
    if (p3d_policy_run("megatron", NULL, f.c, &j, &f.pl, &err) < 0)
        fail_msg("%s", err);
    p3d_elastic e = {.full_dp = 128, .min_dp = 64, .b = 1};
    p3d_gpuref lost[] = {{5, 3}};
    p3d_reshape r;
    if (p3d_shrink_plan(f.c, f.pl, &e, lost, 1, &r, &err) < 0)
        fail_msg("%s", err);
    assert_int_equal(r.width.dp, 120);
    assert_int_equal(p3d_mesh_size(&r.pl->mesh, P3D_DIM_EDP), 15);
    assert_int_equal(r.ndropped, 8);
    for (int k = 1; k < 8; k++) /* one block of 8 consecutive replicas */
        assert_int_equal(r.dropped[k], r.dropped[0] + k);
    assert_int_equal(r.dropped[0] % 8, 0);
    assert_coords_kept(f.pl, r.pl);
    if (p3d_reshape_check(f.c, f.pl, r.pl, &e, lost, 1, &err) < 0)
        fail_msg("%s", err);
    p3d_reshape_free(&r);
    unload(&f);
}

/* A policy file whose shrink() body is `body` (s, cluster, job in scope). */
static char *policy_with(const char *dir, const char *name, const char *body)
{
    char *path = malloc(512);
    snprintf(path, 512, "%s/%s.lua", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "local function place(cluster, job) error('not for a shrink') end\n"
            "local function shrink(cluster, job, s)\n%s\nend\n"
            "return {place = place, shrink = shrink}\n",
            body);
    fclose(f);
    return path;
}

/* The policy chooses which whole replicas stay (here: the highest first);
 * C refuses a broken, repeated or missing one, and a failing hook. */
static void shrink_policy_hook(void **state)
{
    (void)state;
    fx f;
    load(&f, 7);
    char tmpl[] = "/tmp/p3d-elastic-XXXXXX", *err = NULL;
    const char *dir = mkdtemp(tmpl);
    assert_non_null(dir);
    p3d_job j;
    p3d_job_init(&j);
    j.mesh = f.pl->mesh;
    j.min_dp = 2;
    p3d_elastic e = {.full_dp = 7, .min_dp = 2, .b = 1};
    p3d_gpuref lost[] = {{node_of_rank(&f, 2, 1), -1}};
    char want[64];
    snprintf(want, sizeof want, "s.lost[1] == '%s'", f.c->nodes[lost[0].node].name);
    char body[512];
    snprintf(body, sizeof body,
             "  assert(s.from_dp == 7 and s.dp == 6 and s.min_dp == 2 and job.min_dp == 2 and #s.intact == 6 and %s)\n"
             "  assert(s.keep[1] == 0 and s.keep[3] == 3)\n"
             "  local out = {}\n"
             "  for i = #s.intact, 1, -1 do out[#out + 1] = s.intact[i] end\n"
             "  return out",
             want);
    char *good = policy_with(dir, "good", body);
    p3d_reshape r;
    if (p3d_policy_shrink(good, NULL, f.c, &j, f.pl, &e, lost, 1, &r, &err) < 0)
        fail_msg("%s", err);
    assert_int_equal(r.width.dp, 6);
    assert_int_equal(r.from[0], 6);
    assert_int_equal(r.from[5], 0);
    assert_int_equal(r.ndropped, 1);
    assert_coords_kept(f.pl, r.pl);
    p3d_reshape_free(&r);
    /* nil: the default (lowest old dp first) */
    char *dflt = policy_with(dir, "dflt", "  return nil");
    assert_int_equal(p3d_policy_shrink(dflt, NULL, f.c, &j, f.pl, &e, lost, 1, &r, &err), 0);
    assert_int_equal(r.from[2], 3);
    p3d_reshape_free(&r);
    static const struct {
        const char *body, *msg;
    } bad[] = {
        {"  return {0, 1, 2, 3, 4, 5}", "replica 2 lost GPUs"},
        {"  return {0, 1, 3, 3, 4, 5}", "names replica 3 twice"},
        {"  return {0, 1}", "expected exactly s.dp = 6"},
        {"  return {0, 1, 3, 4, 5, 9}", "expected a dp index 0..6"},
        {"  return 'all'", "returned string"},
        {"  error('no way')", "shrink(cluster, job, s) failed"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "bad%zu", i);
        char *p = policy_with(dir, nm, bad[i].body);
        assert_int_equal(p3d_policy_shrink(p, NULL, f.c, &j, f.pl, &e, lost, 1, &r, &err), -1);
        if (!strstr(err, bad[i].msg))
            fail_msg("%s: %s", bad[i].msg, err);
        assert_null(r.pl);
        P3D_FREE(&err);
        remove(p);
        free(p);
    }
    remove(good);
    remove(dflt);
    free(good);
    free(dflt);
    rmdir(dir);
    unload(&f);
}

/* examples/policies/shrink_rack_last.lua: B 20 leaves room for 5 of the 6
 * whole replicas; the one dropped besides the broken replica 2 (rack r1)
 * is another of r1's, not the highest (6, rack r2) as by default. */
static void shrink_example_policy(void **state)
{
    (void)state;
    fx f;
    load(&f, 7);
    char path[512], *err = NULL;
    snprintf(path, sizeof path, "%s/examples/policies/shrink_rack_last.lua", getenv("P3D_DATA_DIR"));
    p3d_job j;
    p3d_job_init(&j);
    j.mesh = f.pl->mesh;
    p3d_elastic e = {.full_dp = 7, .min_dp = 2, .b = 1, .B = 20};
    p3d_gpuref lost[] = {{node_of_rank(&f, 2, 0), -1}};
    assert_string_equal(f.c->racks[f.c->nodes[lost[0].node].rack], "r1");
    assert_string_equal(f.c->racks[f.c->nodes[node_of_rank(&f, 6, 0)].rack], "r2");
    p3d_reshape r;
    assert_int_equal(p3d_shrink_plan(f.c, f.pl, &e, lost, 1, &r, &err), 0);
    assert_int_equal(r.width.dp, 5);
    assert_int_equal(r.dropped[r.ndropped - 1], 6); /* the default: the highest */
    p3d_reshape_free(&r);
    if (p3d_policy_shrink(path, NULL, f.c, &j, f.pl, &e, lost, 1, &r, &err) < 0)
        fail_msg("%s", err);
    assert_int_equal(r.width.dp, 5);
    assert_int_equal(r.ndropped, 2);
    for (int k = 0; k < r.ndropped; k++)
        assert_string_equal(f.c->racks[f.c->nodes[node_of_rank(&f, r.dropped[k], 0)].rack], "r1");
    assert_int_equal(f.c->racks[f.c->nodes[node_of_rank(&f, r.from[0], 0)].rack][1], '2');
    p3d_reshape_free(&r);
    unload(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(widths_and_batch),      cmocka_unit_test(widths_expert_grid),
        cmocka_unit_test(init_refusals),         cmocka_unit_test(nnodes_range),
        cmocka_unit_test(shrink_one_node),       cmocka_unit_test(shrink_assembles),
        cmocka_unit_test(shrink_below_min),      cmocka_unit_test(grow_back),
        cmocka_unit_test(check_refuses),         cmocka_unit_test(shrink_policy_hook),
        cmocka_unit_test(shrink_example_policy), cmocka_unit_test(shrink_expert_grid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
