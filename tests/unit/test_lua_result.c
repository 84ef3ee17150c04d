/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_lua_result.c — par3d.result, the placement held in C: a policy
 * filling it with block operations gets the same placement as the same
 * layout returned rank by rank; its C loops charge the instruction budget
 * (a policy of a few Lua instructions can still run out); a result with a
 * hole, the wrong world or a bad slot is refused with a message; its
 * metatable is hidden; par3d.place_nested (the plain list) and the bundled
 * policies' par3d.layout_nested place identically; par3d.place_ep's C
 * block operations place as its old rank-by-rank Lua did.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "policy_fixture.h"
#include "policy_internal.h"

static p3d_cluster *cl; /* 2048 nodes x 8 GPUs, racks of 32 */
static p3d_job job;     /* tp 8, pp 16, dp 128: world 16384 */

static int setup(void **state)
{
    (void)state;
    cl = fx_simple(2048, 8, 8, 32);
    fx_job(&job, 8, 1, 1, 128, 16, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fx_free(cl);
    return 0;
}

static int run(const char *src, unsigned long long instructions, p3d_placement **pl, char **msg)
{
    p3d_sandbox_limits lim = {256u << 20, instructions, 0};
    p3d_placement *p = NULL;
    *msg = NULL;
    int rc = p3d_policy_run_text("t.lua", "t.lua", src, strlen(src), cl, &job, &lim, &p, msg);
    if (pl)
        *pl = p;
    else
        p3d_placement_free(p);
    return rc;
}

static void expect_fail(const char *src, unsigned long long instructions, const char *want)
{
    char *msg;
    assert_int_equal(run(src, instructions, NULL, &msg), -1);
    assert_non_null(msg);
    if (!strstr(msg, want))
        fprintf(stderr, "message lacks '%s':\n%s\n", want, msg);
    assert_non_null(strstr(msg, want));
    free(msg);
}

static void expect_same(const p3d_placement *a, const p3d_placement *b)
{
    assert_int_equal(a->world, b->world);
    for (int r = 0; r < a->world; r++) {
        assert_int_equal(a->ranks[r].node, b->ranks[r].node);
        assert_int_equal(a->ranks[r].gpu, b->ranks[r].gpu);
        assert_int_equal(a->ranks[r].local_rank, b->ranks[r].local_rank);
        for (int d = 0; d < P3D_NDIMS; d++)
            assert_int_equal(a->ranks[r].coord[d], b->ranks[r].coord[d]);
    }
    assert_int_equal(a->nnotes, b->nnotes);
    for (size_t i = 0; i < a->nnotes; i++)
        assert_string_equal(a->notes[i], b->notes[i]);
}

/* host-list order, rank by rank and by whole nodes and slot runs */
static const char *by_rank = "function place(c, j)\n"
                             "  local res = {}\n"
                             "  for r = 0, par3d.mesh(j).world - 1 do\n"
                             "    res[r + 1] = {rank = r, node = r // 8 + 1, gpu = r % 8} end\n"
                             "  return res, {'n'}\n"
                             "end\n";
static const char *by_node = "function place(c, j)\n"
                             "  local res = par3d.result(par3d.mesh(j).world)\n"
                             "  for n = 1, #c.nodes do res:assign((n - 1) * 8, n, 0, 8) end\n"
                             "  return res, {'n'}\n"
                             "end\n";
static const char *by_slots = "function place(c, j)\n"
                              "  local W = par3d.mesh(j).world\n"
                              "  local res, nodes, gpus = par3d.result(W), {}, {}\n"
                              "  for s = 1, W do nodes[s], gpus[s] = (s - 1) // 8 + 1, (s - 1) % 8 end\n"
                              "  for u = 0, W // 8 - 1 do res:assign_slots(u * 8, nodes, gpus, u * 8 + 1, 8) end\n"
                              "  assert(#res == W and select(2, res:get(9)) == 1 and res:get(9) == 2)\n"
                              "  return res, {'n'}\n"
                              "end\n";

static void test_block_ops_place_like_rank_by_rank(void **state)
{
    (void)state;
    p3d_placement *a, *b, *d;
    char *msg;
    assert_int_equal(run(by_rank, 0, &a, &msg), 0);
    assert_int_equal(run(by_node, 0, &b, &msg), 0);
    assert_int_equal(run(by_slots, 0, &d, &msg), 0);
    expect_same(a, b);
    expect_same(a, d);
    assert_int_equal(b->ranks[9].node, 1);
    assert_int_equal(b->ranks[9].gpu, 1);
    assert_string_equal(b->notes[0], "n");
    p3d_placement_free(a);
    p3d_placement_free(b);
    p3d_placement_free(d);
}

/* megatron.lua returns layout_nested's par3d.result; a user policy
 * returning place_nested's plain list (which it may edit) places the same */
static void test_layout_nested_equals_place_nested(void **state)
{
    (void)state;
    p3d_placement *a = NULL, *b;
    char *msg = NULL;
    const char *list = "function place(c, j) local res, notes = par3d.place_nested(c, j)\n"
                       "  assert(type(res) == 'table' and res[1].rank == 0 and res[1].tp == 0)\n"
                       "  return res, notes end\n";
    const char *block = "function place(c, j) return par3d.layout_nested(c, j) end\n";
    assert_int_equal(p3d_policy_run("megatron", NULL, cl, &job, &a, &msg), 0);
    assert_int_equal(run(list, 0, &b, &msg), 0);
    /* megatron rewrites the notes' "pipelines" wording; compare the ranks */
    for (int r = 0; r < a->world; r++) {
        assert_int_equal(a->ranks[r].node, b->ranks[r].node);
        assert_int_equal(a->ranks[r].gpu, b->ranks[r].gpu);
    }
    p3d_placement_free(b);
    assert_int_equal(run(block, 0, &b, &msg), 0);
    for (int r = 0; r < a->world; r++) {
        assert_int_equal(a->ranks[r].node, b->ranks[r].node);
        assert_int_equal(a->ranks[r].gpu, b->ranks[r].gpu);
    }
    p3d_placement_free(a);
    p3d_placement_free(b);
}

/* a dozen Lua instructions, 40 x 16384 ranks of C work: the budget is spent
 * by what the C helpers charge, and pcall cannot swallow it */
static void test_c_work_charges_the_budget(void **state)
{
    (void)state;
    char *msg;
    const char *few = "function place(c, j)\n"
                      "  local res = par3d.result(par3d.mesh(j).world)\n"
                      "  for k = 1, %d do pcall(res.assign, res, 0, 1, 0, 16384) end\n"
                      "  for n = 1, #c.nodes do res:assign((n - 1) * 8, n, 0, 8) end\n"
                      "  return res\n"
                      "end\n";
    char src[512];
    snprintf(src, sizeof src, few, 1);
    unsigned long long base_ins;
    assert_int_equal(run(src, 0, NULL, &msg), 0);
    p3d_policy_last_stats(&base_ins, NULL);
    snprintf(src, sizeof src, few, 41);
    unsigned long long more;
    assert_int_equal(run(src, 0, NULL, &msg), 0);
    p3d_policy_last_stats(&more, NULL);
    /* 40 more calls of 16384 ranks each are charged, not ~200 instructions */
    assert_true(more - base_ins >= 40ULL * 16384);
    /* and a budget the Lua alone fits in is spent by them */
    expect_fail(src, base_ins + 100000, "instruction budget");
    snprintf(src, sizeof src, few, 1);
    char *m2;
    assert_int_equal(run(src, base_ins + 100000, NULL, &m2), 0);
}

/* par3d.place_ep as it was before its per-rank work moved into C
 * (res:place_ep, res:tp_split, par3d.ep_blocks, par3d.unit_tiers), rank
 * by rank in Lua: the C version must place every rank and write every
 * note the same. */
static const char *old_ep =
    "local function old_place_ep(cluster, job)\n"
    "  local m = par3d.mesh(job)\n"
    "  local W, sz, st = m.world, m.size, m.stride\n"
    "  local parent = {}\n"
    "  for r = 0, W - 1 do parent[r] = r end\n"
    "  local function find(x)\n"
    "    while parent[x] ~= x do\n"
    "      parent[x] = parent[parent[x]]\n"
    "      x = parent[x]\n"
    "    end\n"
    "    return x\n"
    "  end\n"
    "  -- join every rank with its predecessor in its tp, etp and ep groups\n"
    "  for _, dim in ipairs({\"tp\", \"etp\", \"ep\"}) do\n"
    "    local s, n = st[dim], sz[dim]\n"
    "    if n > 1 then\n"
    "      for r = 0, W - 1 do\n"
    "        if (r // s) % n ~= 0 then\n"
    "          local a, b = find(r), find(r - s)\n"
    "          if a < b then parent[b] = a elseif b < a then parent[a] = b end\n"
    "        end\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  local members, roots = {}, {}\n"
    "  for r = 0, W - 1 do\n"
    "    local k = find(r)\n"
    "    local l = members[k]\n"
    "    if not l then\n"
    "      l = {}\n"
    "      members[k] = l\n"
    "      roots[#roots + 1] = k\n"
    "    end\n"
    "    l[#l + 1] = r\n"
    "  end\n"
    "  local S = #members[roots[1]]\n"
    "  local spp, pp = st.pp, sz.pp\n"
    "  local stage0 = {}\n"
    "  for _, k in ipairs(roots) do\n"
    "    if #members[k] ~= S then return par3d.place_nested(cluster, job) end\n"
    "    if (k // spp) % pp == 0 then stage0[#stage0 + 1] = k end\n"
    "  end\n"
    "  local nbundles = #stage0\n"
    "  local notes = {}\n"
    "  local U = par3d.units(cluster, par3d.node_sequence(cluster), S, W // S)\n"
    "  local order = par3d.pack(U, pp, nbundles, notes, pp > 1 and \"EP pipeline block\" or \"EP block\")\n"
    "  local res = {}\n"
    "  local stp, ntp = st.tp, sz.tp\n"
    "  for b, k in ipairs(stage0) do\n"
    "    for s = 0, pp - 1 do\n"
    "      local u = order[(b - 1) * pp + s + 1]\n"
    "      local slot = (u - 1) * S\n"
    "      -- the block's ranks, each TP group on consecutive slots\n"
    "      local done = {}\n"
    "      for _, r0 in ipairs(members[k]) do\n"
    "        local r = r0 + s * spp\n"
    "        if not done[r] then\n"
    "          local base = r - ((r // stp) % ntp) * stp\n"
    "          for i = 0, ntp - 1 do\n"
    "            local q = base + i * stp\n"
    "            done[q] = true\n"
    "            slot = slot + 1\n"
    "            res[q + 1] = {rank = q, node = U.node[slot], gpu = U.gpu[slot]}\n"
    "          end\n"
    "        end\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  -- TP groups are laid on consecutive slots of their block; inside a block\n"
    "  -- that leaves NVLink some of them may straddle two domains: say so\n"
    "  local domof, split, ntpg = {}, 0, 0\n"
    "  for nd = 1, #cluster.nodes do\n"
    "    local d = {}\n"
    "    for k, gpus in ipairs(cluster.nodes[nd].domains) do\n"
    "      for _, g in ipairs(gpus) do d[g] = k end\n"
    "    end\n"
    "    domof[nd] = d\n"
    "  end\n"
    "  for r = 0, W - 1, 1 do\n"
    "    if (r // stp) % ntp == 0 then\n"
    "      ntpg = ntpg + 1\n"
    "      local a = res[r + 1]\n"
    "      for i = 1, ntp - 1 do\n"
    "        local b = res[r + i * stp + 1]\n"
    "        if b.node ~= a.node or domof[b.node][b.gpu] ~= domof[a.node][a.gpu] then\n"
    "          split = split + 1\n"
    "          break\n"
    "        end\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  if split > 0 then\n"
    "    notes[#notes + 1] = string.format(\n"
    "      \"TP rule degraded: %d of %d TP groups span NVLink domains: they sit inside EP blocks of %d GPUs that do not fit one domain\",\n"
    "      split, ntpg, S)\n"
    "  end\n"
    "  if res[1].node ~= 1 then\n"
    "    notes[#notes + 1] = string.format(\"rank 0 rule degraded: rank 0 is on %s, not on the job's first node %s: EP blocks of %d GPUs are placed where they fit best\",\n"
    "      cluster.nodes[res[1].node].name, cluster.nodes[1].name, S)\n"
    "  end\n"
    "  -- what each block got: 1 NVLink domain, 2 one node, 3 several nodes\n"
    "  local count, in_rack, racks = {0, 0, 0}, 0, {}\n"
    "  for u = 1, U.n do\n"
    "    local t = U.tier[u]\n"
    "    count[t] = count[t] + 1\n"
    "    if t == 3 then\n"
    "      local one = true\n"
    "      for p = (u - 1) * S + 1, u * S do\n"
    "        if cluster.nodes[U.node[p]].rack_index ~= U.rack[u] then one = false end\n"
    "      end\n"
    "      if one then in_rack = in_rack + 1 end\n"
    "    end\n"
    "  end\n"
    "  local what = string.format(\"EP blocks of %d GPUs (tp=%d, etp=%d, ep=%d: the TP and expert tp-ep groups that share ranks)\",\n"
    "    S, sz.tp, sz.etp, sz.ep)\n"
    "  if count[2] + count[3] == 0 then\n"
    "    notes[#notes + 1] = string.format(\"EP rule: all %d %s sit inside one NVLink domain each, so every EP all-to-all stays on NVLink\",\n"
    "      U.n, what)\n"
    "  else\n"
    "    local largest = 0\n"
    "    for _, nd in ipairs(cluster.nodes) do\n"
    "      for _, d in ipairs(nd.domains) do\n"
    "        if #d > largest then largest = #d end\n"
    "      end\n"
    "    end\n"
    "    for _, d in ipairs(par3d.nvlink_domains(cluster)) do\n"
    "      local g = 0\n"
    "      for _, i in ipairs(d.nodes) do g = g + cluster.nodes[i].ngpus end\n"
    "      if g > largest then largest = g end\n"
    "    end\n"
    "    notes[#notes + 1] = string.format(\n"
    "      \"EP rule degraded: %d of %d %s do not fit one NVLink domain (the largest has %d GPUs%s): %d stay inside one node, %d span nodes inside one rack, %d span racks; their all-to-alls leave NVLink\",\n"
    "      count[2] + count[3], U.n, what, largest, S > largest and \"\" or \", and not enough of them have room\",\n"
    "      count[2], in_rack, count[3] - in_rack)\n"
    "  end\n"
    "  return res, notes\n"
    "end\n"
    "function place(c, j) return old_place_ep(c, j) end\n";

static int run_on(p3d_cluster *c, const p3d_job *j, const char *src, unsigned long long ins, p3d_placement **pl,
                  char **msg)
{
    p3d_sandbox_limits lim = {256u << 20, ins, 0};
    *msg = NULL;
    return p3d_policy_run_text("t.lua", "t.lua", src, strlen(src), c, j, &lim, pl, msg);
}

/* MoE meshes on one-domain and two-domain nodes (blocks inside a domain,
 * inside a node, across nodes; TP groups split across domains), the
 * pipeline dimension on and off */
static void test_place_ep_equals_lua(void **state)
{
    (void)state;
    static const struct {
        int g, dsz, tp, etp, ep, dp, pp;
    } cases[] = {
        {8, 8, 8, 8, 4, 128, 16}, {8, 8, 2, 2, 4, 512, 16}, {8, 8, 4, 1, 8, 256, 16},
        {8, 4, 8, 8, 2, 128, 16}, {8, 4, 2, 1, 8, 1024, 8}, {8, 8, 1, 1, 16, 2048, 8},
    };
    const char *now = "function place(c, j) return par3d.place_ep(c, j) end\n";
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        p3d_cluster *c = fx_simple(2048, cases[k].g, cases[k].dsz, 32);
        p3d_job j;
        fx_job(&j, cases[k].tp, 1, cases[k].ep, cases[k].dp, cases[k].pp, NULL);
        j.mesh.size[P3D_DIM_ETP] = cases[k].etp;
        p3d_placement *a = NULL, *b = NULL;
        char *msg = NULL;
        if (run_on(c, &j, old_ep, 0, &a, &msg) != 0)
            fail_msg("case %zu, Lua: %s", k, msg);
        if (run_on(c, &j, now, 0, &b, &msg) != 0)
            fail_msg("case %zu, C: %s", k, msg);
        expect_same(a, b);
        assert_true(a->nnotes >= 1);
        p3d_placement_free(a);
        p3d_placement_free(b);
        fx_free(c);
    }
    /* one case's notes, to know the comparison saw the degraded paths */
    p3d_cluster *c = fx_simple(64, 8, 4, 16);
    p3d_job j;
    fx_job(&j, 8, 1, 2, 32, 2, NULL);
    p3d_placement *b = NULL;
    char *msg = NULL;
    assert_int_equal(run_on(c, &j, now, 0, &b, &msg), 0);
    int tp_note = 0, ep_note = 0;
    for (size_t i = 0; i < b->nnotes; i++) {
        tp_note |= strstr(b->notes[i], "TP rule degraded: 64 of 64 TP groups span NVLink domains") != NULL;
        ep_note |= strstr(b->notes[i], "EP rule degraded: 32 of 32 EP blocks of 16 GPUs") != NULL &&
                   strstr(b->notes[i], "0 stay inside one node, 32 span nodes inside one rack, 0 span racks") != NULL;
    }
    if (!tp_note || !ep_note)
        for (size_t i = 0; i < b->nnotes; i++)
            fprintf(stderr, "note: %s\n", b->notes[i]);
    assert_true(tp_note && ep_note);
    p3d_placement_free(b);
    /* the C work is charged: a budget the Lua of place_ep fits in is not enough */
    p3d_placement *x = NULL;
    assert_int_equal(run_on(c, &j, now, 0, &x, &msg), 0);
    p3d_placement_free(x);
    unsigned long long ins;
    p3d_policy_last_stats(&ins, NULL);
    assert_true(ins >= 12ULL * 1024); /* ep_blocks and place_ep: 12 and 18 per rank */
    assert_int_equal(run_on(c, &j, now, ins / 2, &x, &msg), -1);
    assert_non_null(strstr(msg, "instruction budget"));
    free(msg);
    fx_free(c);
}

/* par3d.replace as it was before its pass over the previous placement
 * moved into C (res:keep_previous): rank by rank in Lua. */
static const char *old_replace =
    "local function gpu_map(spare, gpus, failed_domains)\n"
    "  local map, same = {}, failed_domains ~= nil and #spare.domains == #failed_domains\n"
    "  if same then\n"
    "    for d, list in ipairs(spare.domains) do\n"
    "      if #list ~= #failed_domains[d] then same = false end\n"
    "    end\n"
    "  end\n"
    "  if same or not failed_domains then\n"
    "    local ok = true\n"
    "    for _, g in ipairs(gpus) do\n"
    "      if g >= spare.ngpus then ok = false end\n"
    "    end\n"
    "    if ok then\n"
    "      for _, g in ipairs(gpus) do map[g] = g end\n"
    "      return map\n"
    "    end\n"
    "  end\n"
    "  local free = {}\n"
    "  for _, list in ipairs(spare.domains) do\n"
    "    for _, x in ipairs(list) do free[#free + 1] = x end\n"
    "  end\n"
    "  table.sort(gpus)\n"
    "  for k, g in ipairs(gpus) do\n"
    "    if not free[k] then return nil end\n"
    "    map[g] = free[k]\n"
    "  end\n"
    "  return map\n"
    "end\n"
    "local function old_replace(cluster, job)\n"
    "  local prev = job.previous\n"
    "  local byname, result, notes = {}, {}, {}\n"
    "  for i, nd in ipairs(cluster.nodes) do byname[nd.name] = i end\n"
    "  local lost, order = {}, {}   -- failed node name -> {ranks=, gpus=}\n"
    "  for r = 0, job.world - 1 do\n"
    "    local p = prev.ranks[r + 1]\n"
    "    local i = byname[p.node]\n"
    "    if i and not cluster.nodes[i].spare then\n"
    "      result[r + 1] = {rank = r, node = i, gpu = p.gpu}\n"
    "    else\n"
    "      local e = lost[p.node]\n"
    "      if not e then\n"
    "        e = {ranks = {}, gpus = {}}\n"
    "        lost[p.node] = e\n"
    "        order[#order + 1] = p.node\n"
    "      end\n"
    "      e.ranks[#e.ranks + 1] = r\n"
    "      e.gpus[#e.gpus + 1] = p.gpu\n"
    "    end\n"
    "  end\n"
    "  local info = {}\n"
    "  for _, f in ipairs(prev.failed or {}) do info[f.name] = f end\n"
    "  local rack_index = {}\n"
    "  for _, rk in ipairs(par3d.racks(cluster)) do rack_index[rk.name] = rk.index end\n"
    "  local taken = {}\n"
    "  for _, name in ipairs(order) do\n"
    "    local e, f = lost[name], info[name] or {}\n"
    "    local best, best_key\n"
    "    for i, nd in ipairs(cluster.nodes) do\n"
    "      if nd.spare and not taken[i] and nd.ngpus >= #e.ranks then\n"
    "        local key\n"
    "        if f.nvlink_domain and nd.nvlink_domain == f.nvlink_domain then\n"
    "          key = 0\n"
    "        elseif f.rack and nd.rack == f.rack then\n"
    "          key = 1\n"
    "        else\n"
    "          local d = 1000\n"
    "          local a, b = rack_index[f.rack], rack_index[nd.rack]\n"
    "          if a and b and cluster.rack_distance and cluster.rack_distance[a] then\n"
    "            local x = cluster.rack_distance[a][b]\n"
    "            if x and x >= 0 then d = x end\n"
    "          end\n"
    "          key = 2 + d\n"
    "        end\n"
    "        if not best_key or key < best_key then best, best_key = i, key end\n"
    "      end\n"
    "    end\n"
    "    if not best then\n"
    "      error(string.format(\"no spare node left for the %d ranks of lost node %s (every --spares node is in use \" ..\n"
    "        \"or lost)\", #e.ranks, name), 0)\n"
    "    end\n"
    "    taken[best] = true\n"
    "    local spare = cluster.nodes[best]\n"
    "    local map = gpu_map(spare, e.gpus, nil)\n"
    "    if not map then\n"
    "      error(string.format(\"spare node %s has %d GPUs, lost node %s ran %d ranks\", spare.name, spare.ngpus,\n"
    "        name, #e.ranks), 0)\n"
    "    end\n"
    "    for k, r in ipairs(e.ranks) do\n"
    "      result[r + 1] = {rank = r, node = best, gpu = map[e.gpus[k]]}\n"
    "    end\n"
    "    local where = best_key == 0 and \"same NVLink domain \" .. f.nvlink_domain\n"
    "      or best_key == 1 and \"same rack \" .. f.rack or \"another rack: \" .. spare.rack\n"
    "    notes[#notes + 1] = string.format(\"replacement: the %d ranks of lost node %s moved to spare %s (%s); \" ..\n"
    "      \"every other rank stayed where it was\", #e.ranks, name, spare.name, where)\n"
    "  end\n"
    "  return result, notes\n"
    "end\n"
    "-- Choosing the hot spares (--spares K; docs/policies.md \"Choosing the\n"
    "-- spares\"). par3drun calls the policy's spares(cluster, job) when it has\n"
    "-- one, else this rule. cluster.nodes are the usable nodes (no --exclude'd\n"
    "-- node); the result is a list of job.spares node names.\n"
    "-- The rule: the spare units (racks; in a cluster with multi-node NVLink\n"
    "-- domains, each rack's NVLink domains: par3d.spare_units), in the order\n"
    "-- of their first node, take turns giving their last node not yet chosen,\n"
    "-- while the unit keeps at least one node that runs ranks; when every unit\n"
    "-- is down to one node, units keep taking turns giving their last node (a\n"
    "-- unit may then run no rank at all). A spare thus sits in every rack (and\n"
    "-- NVLink domain) that has room, so that a lost node's ranks can stay in\n"
    "-- their rack, or on the NVLink fabric their tensor-parallel peers use.\n"
    "-- Where spares are spread: {{name=, nodes={i, ...}}, ...} in the order of\n"
    "-- first appearance. Racks; a node in a multi-node NVLink domain counts in\n"
    "-- its (rack, domain) pair instead, so that two NVL36 domains of one rack\n"
    "-- are two units. Nodes outside any domain stay with their rack.\n"
    "function place(c, j) return old_replace(c, j) end\n";

/* 2048 nodes, the last 4 spares; the previous placement ran on the first
 * 2044, of which two are gone (names the cluster lacks) and one is now a
 * spare (its ranks move too): the C pass keeps and moves the same ranks,
 * with the same notes. */
static void test_replace_equals_lua(void **state)
{
    (void)state;
    p3d_cluster *c = fx_simple(2048, 8, 8, 32);
    for (size_t i = 2044; i < 2048; i++)
        c->nodes[i].role = P3D_NODE_SPARE;
    enum { W = 2044 * 8 };
    static const char *names[W];
    static int gpus[W];
    for (int r = 0; r < W; r++) {
        int n = r / 8;
        names[r] = n == 5 ? "gone-a" : n == 900 ? "gone-b" : c->nodes[n].name;
        gpus[r] = 7 - r % 8;
    }
    c->nodes[77].role = P3D_NODE_SPARE; /* in use before, a spare now */
    const char *failed[2] = {"gone-a", "gone-b"}, *racks[2] = {"r1", "r29"};
    p3d_previous prev = {
        .world = W, .node = names, .gpu = gpus, .restart = 1, .nfailed = 2, .failed = failed, .failed_rack = racks};
    p3d_job j;
    fx_job(&j, 8, 1, 1, 2044, 1, NULL);
    j.previous = &prev;
    const char *now = "function place(c, j) return par3d.replace(c, j) end\n";
    p3d_placement *a = NULL, *b = NULL;
    char *msg = NULL;
    if (run_on(c, &j, old_replace, 0, &a, &msg) != 0)
        fail_msg("Lua: %s", msg);
    if (run_on(c, &j, now, 0, &b, &msg) != 0)
        fail_msg("C: %s", msg);
    expect_same(a, b);
    assert_int_equal(b->nnotes, 3);
    assert_non_null(strstr(b->notes[0], "lost node gone-a moved to spare"));
    /* gone-a's rank 41 (GPU 6): no spare in its rack r1, no rack distances,
     * so the first spare in list order (node 78, 0-based 77), GPU for GPU */
    assert_int_equal(b->ranks[41].node, 77);
    assert_int_equal(b->ranks[41].gpu, 6);
    assert_int_equal(b->ranks[50].node, 6); /* kept: node and GPU as before */
    assert_int_equal(b->ranks[50].gpu, 5);
    p3d_placement_free(a);
    p3d_placement_free(b);
    fx_free(c);
}

static void test_bad_results_refused(void **state)
{
    (void)state;
    expect_fail("function place(c, j) local r = par3d.result(par3d.mesh(j).world)\n"
                "  for n = 1, #c.nodes - 1 do r:assign((n - 1) * 8, n, 0, 8) end\n"
                "  return r end\n",
                0, "rank 16376 is not assigned");
    expect_fail("function place(c, j) return par3d.result(8) end\n", 0, "a par3d.result of 8 ranks, expected 16384");
    expect_fail("function place(c, j) local r = par3d.result(16384); r:assign(16380, 1, 0, 8) end\n", 0,
                "ranks 16380..16387 are out of range 0..16383");
    expect_fail("function place(c, j) local r = par3d.result(16384); r:set(16384, 1, 0) end\n", 0,
                "rank 16384 is out of range 0..16383");
    expect_fail("function place(c, j) local r = par3d.result(16384)\n"
                "  for n = 1, #c.nodes do r:assign((n - 1) * 8, n, 0, 8) end\n"
                "  r:set(5, 3000, 0) return r end\n",
                0, "node 3000 is not a node index 1..2048");
    /* the validator sees a result like any other: GPU 9 of an 8-GPU node */
    expect_fail("function place(c, j) local r = par3d.result(16384)\n"
                "  for n = 1, #c.nodes do r:assign((n - 1) * 8, n, 0, 8) end\n"
                "  r:set(5, 1, 9) return r end\n",
                0, "rank 5");
    expect_fail("function place(c, j) local r = par3d.result(16384)\n"
                "  r:assign_slots(0, {1, 1}, {0, 'x'}, 1, 2) end\n",
                0, "gpus[2] is not an integer");
    expect_fail("function place(c, j) local m = par3d.mesh(j); local r = par3d.result(m.world)\n"
                "  r:nest_units(m, {1, 2}, {}, {}) end\n",
                0, "order has 2 units, expected 2048");
    /* the metatable is hidden: no way to change the methods or add __gc */
    expect_fail("function place(c, j) local r = par3d.result(4)\n"
                "  assert(getmetatable(r) == false, 'metatable visible') error('hidden') end\n",
                0, "hidden");
}

/* par3d.fill: a C loop over a plain table, charged per element */
static void test_fill(void **state)
{
    (void)state;
    const char *ok = "function place(c, j)\n"
                     "  local t = {1, 2}\n"
                     "  par3d.fill(t, 2, 3, 'x')\n"
                     "  assert(#t == 4 and t[1] == 1 and t[2] == 'x' and t[4] == 'x', 'fill')\n"
                     "  local res = par3d.result(par3d.mesh(j).world)\n"
                     "  for n = 1, #c.nodes do res:assign((n - 1) * 8, n, 0, 8) end\n"
                     "  return res\n"
                     "end\n";
    char *msg;
    assert_int_equal(run(ok, 0, NULL, &msg), 0);
    expect_fail("function place(c, j) par3d.fill(c.nodes, 1, 2, 0) end\n", 0, "expected a plain table");
    expect_fail("function place(c, j) par3d.fill({}, 0, 2, 0) end\n", 0, "par3d.fill: range 0 + 2 is out of range");
    expect_fail("function place(c, j) for i = 1, 100 do par3d.fill({}, 1, 1 << 20, 0) end end\n", 50000000ULL,
                "instruction budget");
}

/* the collector is stopped while the cluster table is built and must run
 * again for the policy: 300 MB of garbage in a 48 MiB sandbox */
static void test_collector_runs_for_the_policy(void **state)
{
    (void)state;
    const char *src = "function place(c, j)\n"
                      "  for i = 1, 3000000 do local t = {i, i, i, i} end\n"
                      "  local res = par3d.result(par3d.mesh(j).world)\n"
                      "  for n = 1, #c.nodes do res:assign((n - 1) * 8, n, 0, 8) end\n"
                      "  return res\n"
                      "end\n";
    p3d_sandbox_limits lim = {48u << 20, 0, 0};
    p3d_placement *p = NULL;
    char *msg = NULL;
    int rc = p3d_policy_run_text("t.lua", "t.lua", src, strlen(src), cl, &job, &lim, &p, &msg);
    if (rc)
        fprintf(stderr, "%s\n", msg);
    assert_int_equal(rc, 0);
    /* running, it keeps the heap near what is live; stopped, only the
     * emergency collection at the cap would save the policy */
    size_t peak;
    p3d_policy_last_stats(NULL, &peak);
    printf("peak Lua heap %zu KiB\n", peak >> 10);
    assert_true(peak < ((size_t)32 << 20));
    p3d_placement_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_ops_place_like_rank_by_rank),
        cmocka_unit_test(test_layout_nested_equals_place_nested),
        cmocka_unit_test(test_c_work_charges_the_budget),
        cmocka_unit_test(test_bad_results_refused),
        cmocka_unit_test(test_place_ep_equals_lua),
        cmocka_unit_test(test_replace_equals_lua),
        cmocka_unit_test(test_fill),
        cmocka_unit_test(test_collector_runs_for_the_policy),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
