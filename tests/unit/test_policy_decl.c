/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_policy_decl.c — what a policy declares and the par3d vocabulary
 * the bundled policies are written in (docs/policies.md):
 *  - the declaration a policy returns ({follows =, place =, spares =}):
 *    its rules and hooks are used, globals are not read beside it, a
 *    misspelt field or a return of another type is refused by name; the
 *    older form (globals, no return) still works;
 *  - the records the layout steps return instead of English only
 *    (par3d.tp_groups, par3d.pipelines, par3d.rank0_rule): their kinds,
 *    causes and counts, and the wordings megatron.lua and devicemesh.lua
 *    choose from them;
 *  - par3d.take_spares, par3d.gpus_per_node, par3d.is_moe.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <unistd.h>

#include "policy_fixture.h"
#include "policy_internal.h"

/* Runs policy text named t.lua; 0 or -1 with *msg. */
static int run(const char *text, const p3d_cluster *c, const p3d_job *j, p3d_placement **pl, char **msg)
{
    *pl = NULL;
    *msg = NULL;
    return p3d_policy_run_text("t.lua", NULL, text, strlen(text), c, j, NULL, pl, msg);
}

static void expect_error(const char *text, const p3d_cluster *c, const p3d_job *j, const char *want)
{
    p3d_placement *pl;
    char *msg;
    assert_int_equal(run(text, c, j, &pl, &msg), -1);
    if (!strstr(msg, want))
        fprintf(stderr, "got: %s\nwant: %s\n", msg, want);
    assert_non_null(strstr(msg, want));
    free(msg);
}

/* every note of pl, joined by '|' */
static char *notes_of(const p3d_placement *pl)
{
    size_t n = 1;
    for (size_t i = 0; i < pl->nnotes; i++)
        n += strlen(pl->notes[i]) + 1;
    char *s = calloc(1, n);
    for (size_t i = 0; i < pl->nnotes; i++) {
        if (i)
            strcat(s, "|");
        strcat(s, pl->notes[i]);
    }
    return s;
}

#define PLACE_ALL                                                                                                      \
    "local function place(c, j) local r = {} for i = 0, j.world - 1 do "                                               \
    "r[#r + 1] = {rank = i, node = c.nodes[1].name, gpu = i} end return r end\n"

static void test_declaration(void **state)
{
    (void)state;
    p3d_cluster *c = fx_simple(2, 8, 8, 0);
    p3d_job j;
    p3d_placement *pl;
    char *msg;
    /* DeviceMesh's rules from the table: (cp=8) is a mesh Megatron refuses */
    fx_job(&j, 1, 8, 1, 1, 1, "cp");
    assert_int_equal(run(PLACE_ALL "return {follows = \"devicemesh\", place = place}", c, &j, &pl, &msg), 0);
    assert_int_equal(pl->mesh.rules, P3D_RULES_DEVICEMESH);
    p3d_placement_free(pl);
    expect_error(PLACE_ALL "return {follows = \"megatron\", place = place}", c, &j,
                 "Megatron requires every dimension");
    /* the table decides: a global beside it is not read */
    fx_job(&j, 8, 1, 1, 1, 1, NULL);
    assert_int_equal(run("follows = \"torch\"\n" PLACE_ALL "return {place = place}", c, &j, &pl, &msg), 0);
    assert_int_equal(pl->mesh.rules, P3D_RULES_MEGATRON);
    p3d_placement_free(pl);
    expect_error("function place() end\nreturn {}", c, &j,
                 "t.lua: the policy does not define a function place(cluster, job) (found nil)");
    /* the older form, globals and no return, still works */
    assert_int_equal(run("follows = \"devicemesh\"\nfunction place(c, j) return par3d.place_nested(c, j) end", c, &j,
                         &pl, &msg),
                     0);
    assert_int_equal(pl->mesh.rules, P3D_RULES_DEVICEMESH);
    p3d_placement_free(pl);
    /* refused by name */
    expect_error(
        PLACE_ALL "return {place = place, plcae = place}", c, &j,
        "t.lua: the table the policy returns has a field 'plcae'; expected only place, spares, shrink and follows");
    expect_error(PLACE_ALL "return {place = place, [1] = 2}", c, &j,
                 "the table the policy returns has a field 'number'");
    expect_error(PLACE_ALL "return place", c, &j,
                 "t.lua: the policy returns function; expected a table {place = ..., spares = ..., follows = ...}");
    expect_error(PLACE_ALL "return {place = place, follows = 3}", c, &j, "t.lua: follows = (a number)");
    fx_free(c);
}

/* The spares hook from the returned table, through p3d_policy_pick_spares
 * (a policy file: the hook is chosen by path). */
static void pick(const char *text, p3d_cluster *c, int k, int want_rc, const char *want)
{
    char path[] = "/tmp/p3d_decl_XXXXXX.lua";
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    p3d_job j;
    fx_job(&j, 8, 1, 1, 0, 1, NULL);
    j.spares = k;
    for (size_t i = 0; i < c->nnodes; i++)
        c->nodes[i].role = P3D_NODE_USE;
    char *msg = NULL;
    int rc = p3d_policy_pick_spares(path, NULL, c, &j, &msg);
    unlink(path);
    if (rc != want_rc || (want && (!msg || !strstr(msg, want))))
        fprintf(stderr, "rc %d: %s\nwant: %s\n", rc, msg ? msg : "-", want ? want : "-");
    assert_int_equal(rc, want_rc);
    if (want)
        assert_non_null(strstr(msg, want));
    free(msg);
}

static void test_spares_hook(void **state)
{
    (void)state;
    p3d_cluster *c = fx_simple(6, 8, 8, 3); /* racks n1-n3, n4-n6 */
    pick(PLACE_ALL "return {place = place, spares = function(c, j) return {\"n00002\"} end}", c, 1, 0, NULL);
    assert_int_equal(c->nodes[1].role, P3D_NODE_SPARE);
    /* take_spares: the units take turns by key, ties to the first unit */
    pick(PLACE_ALL "return {place = place, spares = function(c, j) "
                   "return (par3d.take_spares(c, j.spares, function(u) return {u.given} end)) end}",
         c, 3, 0, NULL);
    assert_int_equal(c->nodes[2].role, P3D_NODE_SPARE); /* n3, n6, n2 */
    assert_int_equal(c->nodes[5].role, P3D_NODE_SPARE);
    assert_int_equal(c->nodes[1].role, P3D_NODE_SPARE);
    assert_int_equal(c->nodes[4].role, P3D_NODE_USE);
    /* a key that prefers the second rack while it has two nodes */
    pick(PLACE_ALL "return {place = place, spares = function(c, j) return (par3d.take_spares(c, j.spares, "
                   "function(u) return {u.name == \"r2\" and u.left >= 2 and 0 or 1, u.given} end)) end}",
         c, 3, 0, NULL);
    assert_int_equal(c->nodes[5].role, P3D_NODE_SPARE); /* n6, n5, then n3 */
    assert_int_equal(c->nodes[4].role, P3D_NODE_SPARE);
    assert_int_equal(c->nodes[2].role, P3D_NODE_SPARE);
    pick(PLACE_ALL "return {place = place, spares = 5}", c, 1, -1,
         "the returned table's field 'spares' is number, expected a function spares(cluster, job)");
    pick("spares = 5\n" PLACE_ALL, c, 1, -1, "the global 'spares' is number");
    pick(PLACE_ALL "return {place = place, spraes = 1}", c, 1, -1, "the table the policy returns has a field 'spraes'");
    fx_free(c);
}

/* The vocabulary's records: what megatron.lua reads instead of English. */
#define RECORDS                                                                                                        \
    "local function place(cluster, job)\n"                                                                             \
    "  local U = par3d.tp_groups(cluster, job)\n"                                                                      \
    "  local order, crossed = par3d.pipelines(U, job)\n"                                                               \
    "  local res = par3d.nest(job, U, order)\n"                                                                        \
    "  local moved = par3d.rank0_rule(res, cluster, job, U)\n"                                                         \
    "  local notes = {}\n"                                                                                             \
    "  for _, d in ipairs(U.degraded) do\n"                                                                            \
    "    notes[#notes + 1] = string.format('%s %s %d/%d', d.rule, d.kind, d.count, d.of) end\n"                        \
    "  if crossed then notes[#notes + 1] = string.format('%s %s %s %d/%d %d', crossed.rule, crossed.kind,\n"           \
    "    crossed.cause, crossed.count, crossed.of, crossed.gpus) end\n"                                                \
    "  if moved then notes[#notes + 1] = string.format('%s %s %s %s %s', moved.rule, moved.kind, moved.cause,\n"       \
    "    moved.node, moved.first) end\n"                                                                               \
    "  local spare, err = par3d.take_spares(cluster, 99, function(u) return {0} end)\n"                                \
    "  notes[#notes + 1] = string.format('%s %s %d %d %s %s %s', tostring(spare), err.kind, err.asked,\n"              \
    "    err.usable, tostring(par3d.gpus_per_node(cluster)), tostring(par3d.is_moe(job)),\n"                           \
    "    tostring(par3d.is_moe({tp = 2, etp = 1})))\n"                                                                 \
    "  return res, notes\n"                                                                                            \
    "end\n"                                                                                                            \
    "return {place = place}"

static void expect_notes(const char *policy, const p3d_cluster *c, const p3d_job *j, const char *want)
{
    p3d_placement *pl;
    char *msg;
    if (run(policy, c, j, &pl, &msg) < 0)
        fprintf(stderr, "%s\n", msg);
    assert_non_null(pl);
    char *got = notes_of(pl);
    if (strcmp(got, want) != 0)
        fprintf(stderr, "got:  %s\nwant: %s\n", got, want);
    assert_string_equal(got, want);
    free(got);
    p3d_placement_free(pl);
}

static void test_records(void **state)
{
    (void)state;
    p3d_job j;
    /* three racks of three nodes, pipelines of two nodes: the racks hold 3
     * whole ones by GPU count, the fourth crosses */
    p3d_cluster *c = fx_simple(9, 8, 8, 3);
    fx_job(&j, 8, 1, 1, 4, 2, NULL);
    expect_notes(RECORDS, c, &j,
                 "pipeline blocks_span_racks racks_too_small 1/4 16|nil too_few_nodes 99 9 8 false true");
    /* the same fact in each bundled policy's words */
    p3d_placement *pl;
    char *msg;
    assert_int_equal(p3d_policy_run("megatron", NULL, c, &j, &pl, &msg), 0);
    char *got = notes_of(pl);
    assert_string_equal(got, "pipeline rule degraded: 1 of 4 pipeline blocks (tp x pp ranks each) span racks (each "
                             "needs 16 GPUs; the racks hold only 3 whole pipelines of 16 GPUs)");
    free(got);
    p3d_placement_free(pl);
    assert_int_equal(p3d_policy_run("devicemesh", NULL, c, &j, &pl, &msg), 0);
    got = notes_of(pl);
    assert_non_null(strstr(got, "|pipeline rule degraded: 1 of 4 pipelines span racks (each needs 16 GPUs; the racks "
                                "hold only 3 whole pipelines of 16 GPUs)"));
    free(got);
    p3d_placement_free(pl);
    /* replicas (pp = 1, cp = 2): megatron keeps the helper's words */
    fx_job(&j, 8, 2, 1, 4, 1, NULL);
    expect_notes(RECORDS, c, &j,
                 "replica blocks_span_racks racks_too_small 1/4 16|nil too_few_nodes 99 9 8 false true");
    assert_int_equal(p3d_policy_run("megatron", NULL, c, &j, &pl, &msg), 0);
    got = notes_of(pl);
    assert_string_equal(got, "replica rule degraded: 1 of 4 replicas span racks (each needs 16 GPUs; the racks hold "
                             "only 3 whole replicas of 16 GPUs)");
    free(got);
    p3d_placement_free(pl);
    /* TP groups over two nodes: one of them over two racks */
    fx_job(&j, 16, 1, 1, 4, 1, NULL);
    expect_notes(RECORDS, c, &j, "TP tp_spans_nodes 3/4|TP tp_spans_racks 1/4|nil too_few_nodes 99 9 8 false true");
    fx_free(c);
    /* rank 0: the first node (4 GPUs, its own rack) has no room for a TP
     * group of 8; rank 0 moves to the next rack */
    static const int rack_of[] = {0, 1, 1, 1, 1}, small_first[] = {1, 0, 0, 0, 0};
    p3d_node *t[2] = {fx_topo(8, 8), fx_topo(4, 4)};
    c = fx_cluster(5, t, 2, small_first, rack_of, 2, NULL, 0);
    fx_job(&j, 8, 1, 1, 2, 2, NULL);
    expect_notes(RECORDS, c, &j,
                 "rank 0 rank0_moved no_nvlink_room n00002 n00001|nil too_few_nodes 99 5 nil false true");
    fx_free(c);
    /* mixed nodes: no single GPU count */
    p3d_node *two[2] = {fx_topo(8, 8), fx_topo(4, 4)};
    static const int topo_of[] = {0, 1};
    c = fx_cluster(2, two, 2, topo_of, NULL, 1, NULL, 0);
    fx_job(&j, 4, 1, 1, 3, 1, NULL);
    expect_notes(RECORDS, c, &j, "nil too_few_nodes 99 2 nil false true");
    fx_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_declaration),
        cmocka_unit_test(test_spares_hook),
        cmocka_unit_test(test_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
