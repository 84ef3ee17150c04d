/* SPDX-License-Identifier: BSD-3-Clause */
/* test_check.c — p3d_analyze and the text/JSON reports on clusters and
 * placements built by hand (no files, no Lua), so each expectation follows
 * from the arithmetic written next to it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "check_internal.h"
#include "cluster_internal.h"
#include "topo_internal.h"

/* 8 GPUs; nvl: 8 = one NVSwitch domain, 2 = NVLink pairs {0,1} {2,3} ... */
static p3d_node *mknode(int ngpus, int nvl)
{
    char *err = NULL;
    p3d_node *n = p3d_node_new("h", "hand-built", "synthetic");
    assert_non_null(n);
    assert_int_equal(p3d_node_alloc(n, ngpus, 1, &err), 0);
    snprintf(n->nics[0].name, sizeof n->nics[0].name, "mlx5_0");
    for (int i = 0; i < ngpus; i++) {
        n->gpus[i].numa = i / 4;
        n->gn_class[i] = P3D_LINK_PIX;
        for (int j = 0; j < ngpus; j++)
            if (i != j && i / nvl == j / nvl)
                n->nvlink[i * ngpus + j] = 900;
    }
    assert_int_equal(p3d_node_finish(n, &err), 0);
    return n;
}

/* nnodes nodes of one shared topology; node i in rack rack_of[i] (names
 * "rA", "rB"...), nvl domain dom_of[i] (-1 none) when dom_of is given. */
static p3d_cluster *mkcluster(int nnodes, int ngpus, int nvl, const int *rack_of, const int *dom_of)
{
    p3d_cluster *c = p3d_cluster_new();
    assert_non_null(c);
    c->topos = calloc(1, sizeof *c->topos);
    c->topos[0] = mknode(ngpus, nvl);
    c->ntopos = 1;
    c->nodes = calloc((size_t)nnodes, sizeof *c->nodes);
    c->nnodes = (size_t)nnodes;
    int maxr = 0, maxd = -1;
    for (int i = 0; i < nnodes; i++) {
        char name[32];
        snprintf(name, sizeof name, "node%03d", i + 1);
        c->nodes[i].name = strdup(name);
        c->nodes[i].topo = c->topos[0];
        c->nodes[i].rack = rack_of ? rack_of[i] : 0;
        c->nodes[i].nvl_domain = dom_of ? dom_of[i] : -1;
        if (c->nodes[i].rack > maxr)
            maxr = c->nodes[i].rack;
        if (c->nodes[i].nvl_domain > maxd)
            maxd = c->nodes[i].nvl_domain;
    }
    c->nracks = (size_t)maxr + 1;
    c->racks = calloc(c->nracks, sizeof *c->racks);
    for (size_t r = 0; r < c->nracks; r++) {
        char name[8];
        snprintf(name, sizeof name, "r%c", (char)('A' + r));
        c->racks[r] = strdup(name);
    }
    c->nnvl_domains = (size_t)(maxd + 1);
    c->nvl_domains = c->nnvl_domains ? calloc(c->nnvl_domains, sizeof *c->nvl_domains) : NULL;
    for (size_t d = 0; d < c->nnvl_domains; d++) {
        char name[40];
        snprintf(name, sizeof name, "nvl72-%zu", d);
        c->nvl_domains[d] = strdup(name);
    }
    return c;
}

static void mkjob(p3d_job *j, int tp, int pp, int dp)
{
    p3d_job_init(j);
    j->mesh.size[P3D_DIM_TP] = tp;
    j->mesh.size[P3D_DIM_PP] = pp;
    j->mesh.size[P3D_DIM_DP] = dp;
}

/* slot_of(rank) -> global slot = node*ngpus + gpu */
static p3d_placement *mkplace(const p3d_job *j, int ngpus, int (*slot_of)(int r, int world))
{
    p3d_placement *p = calloc(1, sizeof *p);
    p->mesh = j->mesh;
    p->world = p3d_mesh_world(&j->mesh);
    p->ranks = calloc((size_t)p->world, sizeof *p->ranks);
    p->policy = strdup("hand");
    p->policy_source = strdup("test_check.c");
    for (int r = 0; r < p->world; r++) {
        int s = slot_of(r, p->world);
        p->ranks[r].node = s / ngpus;
        p->ranks[r].gpu = s % ngpus;
        p3d_mesh_coord(&p->mesh, r, p->ranks[r].coord);
    }
    return p;
}

static void freeplace(p3d_placement *p)
{
    free(p->ranks);
    free(p->policy);
    free(p->policy_source);
    free(p);
}

static int slot_naive(int r, int world)
{
    (void)world;
    return r;
}

/* rank r on node r % 4: every run of 8 consecutive ranks spreads over 4 nodes */
static int slot_strided(int r, int world)
{
    int nodes = 4, per = world / nodes;
    return (r % nodes) * 8 + (r / nodes) % per;
}

static const p3d_check *find(const p3d_analysis *a, const char *code)
{
    for (size_t i = 0; i < a->nchecks; i++)
        if (!strcmp(a->checks[i].code, code))
            return &a->checks[i];
    return NULL;
}

/* 4 nodes in racks A A B B; tp=8 pp=2 dp=2, default order: rank = tp +
 * 8*dp + 16*pp, so naive puts stage 0 on nodes 1-2 (rack A) and stage 1 on
 * nodes 3-4 (rack B): all 16 pipelines cross racks, TP stays on NVLink. */
static void naive_pipelines_cross_racks(void **state)
{
    (void)state;
    int racks[4] = {0, 0, 1, 1};
    p3d_cluster *c = mkcluster(4, 8, 8, racks, NULL);
    p3d_job j;
    mkjob(&j, 8, 2, 2);
    p3d_placement *p = mkplace(&j, 8, slot_naive);
    p3d_analysis *a = NULL;
    char *err = NULL;
    assert_int_equal(p3d_analyze(c, &j, p, &a, &err), 0);
    assert_int_equal(a->dim[P3D_DIM_TP].ngroups, 4);
    assert_int_equal(a->dim[P3D_DIM_TP].worst, P3D_LINK_NVLINK);
    assert_int_equal(a->dim[P3D_DIM_TP].groups_by_link[P3D_LINK_NVLINK], 4);
    assert_int_equal(a->dim[P3D_DIM_PP].ngroups, 16);
    assert_int_equal(p3d_pp_cross_rack(a), 16);
    /* DP pairs: rank r and r+8 -> nodes 1,2 or 3,4: same rack */
    assert_int_equal(a->dim[P3D_DIM_DP].worst, P3D_LINK_RACK);
    assert_int_equal(a->dim[P3D_DIM_DP].groups_by_link[P3D_LINK_RACK], 16);
    const p3d_check *k = find(a, "PP_CROSSES_RACKS");
    assert_non_null(k);
    assert_int_equal(k->severity, P3D_SEV_WARNING);
    assert_non_null(strstr(k->message, "16 of 16 pipelines"));
    assert_int_equal(a->nerrors, 0);
    assert_null(find(a, "TP_CROSSES_NODES"));
    p3d_analysis_free(a);
    freeplace(p);
    p3d_cluster_free(c);
}

/* TP groups of 8 spread over 4 nodes while each node could hold one:
 * avoidable, so an error naming the link class. */
static void tp_across_nodes_is_error(void **state)
{
    (void)state;
    p3d_cluster *c = mkcluster(4, 8, 8, NULL, NULL);
    p3d_job j;
    mkjob(&j, 8, 1, 4);
    p3d_placement *p = mkplace(&j, 8, slot_strided);
    p3d_analysis *a = NULL;
    char *err = NULL;
    assert_int_equal(p3d_analyze(c, &j, p, &a, &err), 0);
    assert_int_equal(a->dim[P3D_DIM_TP].groups_by_link[P3D_LINK_RACK], 4);
    const p3d_check *k = find(a, "TP_CROSSES_NODES");
    assert_non_null(k);
    assert_int_equal(k->severity, P3D_SEV_ERROR);
    assert_non_null(strstr(k->message, "TP all-reduces on every layer will run over the network within a rack"));
    assert_int_equal(a->checks[0].severity, P3D_SEV_ERROR); /* errors sort first */
    p3d_analysis_free(a);
    freeplace(p);
    p3d_cluster_free(c);
}

/* NVLink pairs only (A6000 bridges): tp=4 cannot stay on NVLink anywhere:
 * a warning, not an error; tp=2 on the pairs is clean. */
static void tp_wider_than_domain_is_warning(void **state)
{
    (void)state;
    p3d_cluster *c = mkcluster(2, 8, 2, NULL, NULL);
    p3d_job j;
    mkjob(&j, 4, 1, 4);
    p3d_placement *p = mkplace(&j, 8, slot_naive);
    p3d_analysis *a = NULL;
    char *err = NULL;
    assert_int_equal(p3d_analyze(c, &j, p, &a, &err), 0);
    const p3d_check *k = find(a, "TP_CROSSES_NVLINK_DOMAIN");
    assert_non_null(k);
    assert_int_equal(k->severity, P3D_SEV_WARNING);
    assert_non_null(strstr(k->message, "tp=4 is larger than the largest NVLink domain here (2 GPUs)"));
    p3d_analysis_free(a);
    freeplace(p);
    mkjob(&j, 2, 1, 8);
    p = mkplace(&j, 8, slot_naive);
    assert_int_equal(p3d_analyze(c, &j, p, &a, &err), 0);
    assert_null(find(a, "TP_CROSSES_NVLINK_DOMAIN"));
    assert_int_equal(a->dim[P3D_DIM_TP].worst, P3D_LINK_NVLINK);
    p3d_analysis_free(a);
    freeplace(p);
    p3d_cluster_free(c);
}

/* Multi-node NVLink: TP=16 over 2 trays of one domain is MNNVL, no check;
 * the same over two trays without a domain is the network. */
static void tp_in_mnnvl_domain(void **state)
{
    (void)state;
    int dom[2] = {0, 0};
    p3d_cluster *c = mkcluster(2, 8, 8, NULL, dom);
    p3d_job j;
    mkjob(&j, 16, 1, 1);
    p3d_placement *p = mkplace(&j, 8, slot_naive);
    p3d_analysis *a = NULL;
    char *err = NULL;
    assert_int_equal(p3d_analyze(c, &j, p, &a, &err), 0);
    assert_int_equal(a->dim[P3D_DIM_TP].worst, P3D_LINK_MNNVL);
    assert_null(find(a, "TP_CROSSES_NODES"));
    assert_null(find(a, "TP_NOT_DIVIDING_GPUS_PER_NODE")); /* 16 is a multiple of 8 */
    p3d_analysis_free(a);
    p3d_cluster_free(c);
    c = mkcluster(2, 8, 8, NULL, NULL);
    assert_int_equal(p3d_analyze(c, &j, p, &a, &err), 0);
    const p3d_check *k = find(a, "TP_CROSSES_NODES");
    assert_non_null(k);
    assert_int_equal(k->severity, P3D_SEV_WARNING); /* no domain holds 16: unavoidable */
    p3d_analysis_free(a);
    freeplace(p);
    p3d_cluster_free(c);
}

static void bad_placements_fail(void **state)
{
    (void)state;
    p3d_cluster *c = mkcluster(2, 8, 8, NULL, NULL);
    p3d_job j;
    mkjob(&j, 8, 1, 2);
    p3d_placement *p = mkplace(&j, 8, slot_naive);
    p3d_analysis *a = NULL;
    char *err = NULL;
    p->ranks[5].gpu = 4; /* rank 4 is there already */
    assert_int_equal(p3d_analyze(c, &j, p, &a, &err), -1);
    assert_null(a);
    assert_non_null(strstr(err, "policy hand: GPU 4 of node001 is assigned to both rank 4 and rank 5"));
    P3D_FREE(&err);
    p->ranks[5].gpu = 5;
    p->ranks[9].coord[P3D_DIM_TP] = 0; /* tp=8 order: rank 9 has tp 1 */
    assert_int_equal(p3d_analyze(c, &j, p, &a, &err), -1);
    assert_non_null(strstr(err, "rank 9: tp=0, but under order tp-cp-ep-dp-pp"));
    P3D_FREE(&err);
    p->ranks[9].coord[P3D_DIM_TP] = 1;
    p->ranks[3].node = 7;
    assert_int_equal(p3d_analyze(c, &j, p, &a, &err), -1);
    assert_non_null(strstr(err, "rank 3: node index 7"));
    P3D_FREE(&err);
    p->ranks[3].node = 0;
    assert_int_equal(p3d_analyze(c, &j, p, &a, &err), 0);
    p3d_analysis_free(a);
    freeplace(p);
    p3d_cluster_free(c);
}

static void batch_and_world_rules(void **state)
{
    (void)state;
    p3d_cluster *c = mkcluster(4, 8, 8, NULL, NULL);
    p3d_job j;
    mkjob(&j, 8, 1, 2); /* 16 of 32 GPUs */
    j.global_batch = 8;
    j.micro_batch_size = 8; /* 8 / 8 = 1 micro-batch < dp = 2 */
    p3d_placement *p = mkplace(&j, 8, slot_naive);
    p3d_analysis *a = NULL;
    char *err = NULL;
    assert_int_equal(p3d_analyze(c, &j, p, &a, &err), 0);
    const p3d_check *k = find(a, "DP_GT_BATCH");
    assert_non_null(k);
    assert_int_equal(k->severity, P3D_SEV_ERROR);
    k = find(a, "NODES_IDLE");
    assert_non_null(k);
    assert_non_null(strstr(k->message, "16 GPUs stay idle (2 nodes without any rank)"));
    p3d_analysis_free(a);
    j.global_batch = 24; /* 24 % (2*8) != 0 */
    assert_int_equal(p3d_analyze(c, &j, p, &a, &err), 0);
    assert_null(find(a, "DP_GT_BATCH"));
    assert_non_null(find(a, "BATCH_NOT_DIVISIBLE"));
    p3d_analysis_free(a);
    freeplace(p);
    /* tp=3 on 8-GPU nodes */
    mkjob(&j, 3, 1, 8);
    p = mkplace(&j, 8, slot_naive);
    assert_int_equal(p3d_analyze(c, &j, p, &a, &err), 0);
    k = find(a, "TP_NOT_DIVIDING_GPUS_PER_NODE");
    assert_non_null(k);
    assert_non_null(strstr(k->message, "1, 2, 4, 8"));
    p3d_analysis_free(a);
    freeplace(p);
    p3d_cluster_warn(c, "topology.conf: node x is under two switches");
    mkjob(&j, 8, 1, 4);
    p = mkplace(&j, 8, slot_naive);
    assert_int_equal(p3d_analyze(c, &j, p, &a, &err), 0);
    assert_non_null(find(a, "CLUSTER_WARNING"));
    p3d_analysis_free(a);
    freeplace(p);
    p3d_cluster_free(c);
}

/* The reports over the rack example: text lines <= 100 columns, the
 * comparison in numbers; JSON parses, has every rank and group, and two
 * renderings are byte-identical. */
static void reports(void **state)
{
    (void)state;
    int racks[4] = {0, 0, 1, 1};
    p3d_cluster *c = mkcluster(4, 8, 8, racks, NULL);
    p3d_job j;
    mkjob(&j, 8, 2, 2);
    p3d_placement *p = mkplace(&j, 8, slot_naive);
    p3d_placement *q = mkplace(&j, 8, slot_naive);
    free(q->policy);
    q->policy = strdup("naive");
    p3d_analysis *a = NULL, *z = NULL;
    char *err = NULL;
    assert_int_equal(p3d_analyze(c, &j, p, &a, &err), 0);
    assert_int_equal(p3d_analyze(c, &j, q, &z, &err), 0);
    p3d_report_in in = {.cluster = c, .job = &j, .pl = p, .an = a, .base_pl = q, .base_an = z};
    char *t = p3d_report_text(&in);
    assert_non_null(t);
    if (getenv("P3D_TEST_PRINT")) /* to look at the report while editing it */
        fputs(t, stdout);
    for (char *l = t, *e; *l; l = e + 1) {
        e = strchr(l, '\n');
        assert_non_null(e);
        if (e - l > 100)
            fail_msg("line longer than 100: %.*s", (int)(e - l), l);
    }
    assert_non_null(strstr(t, "naive: 16 of 16 pipelines cross racks; hand: 16\n"));
    assert_non_null(strstr(t, "tp: 4 groups of 8  [0-7] [8-15] [16-23] [24-31]"));
    assert_non_null(strstr(t, "PP_CROSSES_RACKS"));
    assert_null(strchr(t, '\033'));
    char *t2 = p3d_report_text(&in);
    assert_string_equal(t, t2);
    char *js = p3d_report_json(&in);
    char *js2 = p3d_report_json(&in);
    assert_string_equal(js, js2);
    cJSON *doc = cJSON_Parse(js);
    assert_non_null(doc);
    assert_int_equal(cJSON_GetObjectItem(doc, "world_size")->valueint, 32);
    cJSON *ranks = cJSON_GetObjectItem(doc, "ranks");
    assert_int_equal(cJSON_GetArraySize(ranks), 32);
    cJSON *r9 = cJSON_GetArrayItem(ranks, 9);
    assert_string_equal(cJSON_GetObjectItem(r9, "node")->valuestring, "node002");
    assert_int_equal(cJSON_GetObjectItem(r9, "gpu")->valueint, 1);
    assert_string_equal(cJSON_GetObjectItem(r9, "nic")->valuestring, "mlx5_0");
    assert_string_equal(cJSON_GetObjectItem(r9, "nvlink_domain")->valuestring, "node002/0");
    assert_string_equal(cJSON_GetObjectItem(r9, "rack")->valuestring, "rA");
    cJSON *pp = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "groups"), "pp");
    assert_int_equal(cJSON_GetArraySize(pp), 16);
    assert_int_equal(cJSON_GetArrayItem(cJSON_GetArrayItem(pp, 3), 1)->valueint, 19);
    cJSON *m = cJSON_GetObjectItem(doc, "metrics");
    assert_int_equal(cJSON_GetObjectItem(m, "pipelines_crossing_racks")->valueint, 16);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "baseline"), "pipelines_crossing_racks")->valueint, 16);
    cJSON_Delete(doc);
    in.color = 1;
    char *tc = p3d_report_text(&in);
    assert_non_null(strchr(tc, '\033'));
    free(tc);
    free(t);
    free(t2);
    free(js);
    free(js2);
    p3d_analysis_free(a);
    p3d_analysis_free(z);
    freeplace(p);
    freeplace(q);
    p3d_cluster_free(c);
}

/* The TP advice fits who placed it: megatron missing a placement that
 * exists is the policy's shortfall, never "use --policy megatron". */
static void tp_advice_names_the_cause(void **state)
{
    (void)state;
    p3d_cluster *c = mkcluster(4, 8, 8, NULL, NULL);
    p3d_job j;
    mkjob(&j, 8, 1, 4);
    p3d_placement *p = mkplace(&j, 8, slot_strided);
    p3d_analysis *a = NULL;
    char *err = NULL;
    assert_int_equal(p3d_analyze(c, &j, p, &a, &err), 0);
    const p3d_check *k = find(a, "TP_CROSSES_NODES");
    assert_non_null(k);
    assert_non_null(strstr(k->message, "(4 groups of 8 fit, 4 needed): use a topology-aware policy (--policy megatron) "
                                       "or fix policy hand."));
    p3d_analysis_free(a);
    free(p->policy);
    p->policy = strdup("megatron");
    assert_int_equal(p3d_analyze(c, &j, p, &a, &err), 0);
    k = find(a, "TP_CROSSES_NODES");
    assert_non_null(k);
    assert_null(strstr(k->message, "--policy megatron"));
    assert_non_null(strstr(k->message, "yet policy megatron did not find such a placement"));
    p3d_analysis_free(a);
    freeplace(p);
    p3d_cluster_free(c);
}

/* PP_CROSSES_RACKS states the cause that holds: racks A A A B (24 and 8
 * GPUs), tp8 pp2 dp2 placed naively: a block of 16 GPUs fits rack A but
 * not rack B, so the old "a pipeline needs more GPUs than a rack holds" was
 * false; the racks hold 1 whole block of 2. Racks A B C D (8 each): no rack
 * holds one. Racks A A B B: both fit, so the cause is the placement. */
static void pp_cause_is_true(void **state)
{
    (void)state;
    static const struct {
        int racks[4];
        const char *policy, *want;
    } cases[] = {
        {{0, 0, 0, 1},
         "hand",
         "The racks (8 to 24 GPUs) hold at most 1 whole pipeline block of 16 GPUs (pp x tp x cp) and the job "
         "has 2, so at least 1 must cross racks"},
        {{0, 1, 2, 3},
         "hand",
         "A pipeline block (pp x tp x cp = 16 GPUs) needs more GPUs than any rack holds "
         "(racks of 8 GPUs)"},
        {{0, 0, 1, 1},
         "hand",
         "A pipeline block (16 GPUs) fits in one rack here (racks of 16 GPUs) and the "
         "racks hold all 2: use a rack-aware policy"},
        {{0, 0, 1, 1},
         "megatron",
         "By GPU count the racks (16 GPUs) could hold all 2 pipeline blocks of 16 "
         "GPUs whole; policy megatron crossed racks"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        p3d_cluster *c = mkcluster(4, 8, 8, cases[i].racks, NULL);
        p3d_job j;
        mkjob(&j, 8, 2, 2);
        p3d_placement *p = mkplace(&j, 8, slot_naive);
        free(p->policy);
        p->policy = strdup(cases[i].policy);
        p3d_analysis *a = NULL;
        char *err = NULL;
        assert_int_equal(p3d_analyze(c, &j, p, &a, &err), 0);
        const p3d_check *k = find(a, "PP_CROSSES_RACKS");
        assert_non_null(k);
        if (!strstr(k->message, cases[i].want))
            fail_msg("case %zu: %s", i, k->message);
        assert_null(strstr(k->message, "than a rack holds"));
        p3d_analysis_free(a);
        freeplace(p);
        p3d_cluster_free(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(naive_pipelines_cross_racks),
        cmocka_unit_test(tp_across_nodes_is_error),
        cmocka_unit_test(tp_wider_than_domain_is_warning),
        cmocka_unit_test(tp_in_mnnvl_domain),
        cmocka_unit_test(bad_placements_fail),
        cmocka_unit_test(batch_and_world_rules),
        cmocka_unit_test(reports),
        cmocka_unit_test(tp_advice_names_the_cause),
        cmocka_unit_test(pp_cause_is_true),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
