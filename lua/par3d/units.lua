-- SPDX-License-Identifier: BSD-3-Clause
-- par3d/units.lua — units, the blocks of GPUs that each become one TP
-- group: how many of each tier every rack can give (par3d.capacity,
-- par3d.unit_bounds) and cutting them out of the nodes (par3d.units).
-- lua/par3d.lua loads it through the sandbox's module loader and passes
-- the module table, the C core and the helpers the modules share.

local par3d = ...
-- block copies in C: table.move, and par3d.fill (placement/policy/
-- lua_result.c), so that the per-GPU work of a node or a unit is one call
local move, fill = table.move, par3d.fill

---------------------------------------------------------------------------
-- Units: blocks of `size` GPUs that become one TP group each. The placement
-- objective (the same as the report's metrics.objective), lexicographic:
--   1. fewest TP groups off one NVLink domain;
--   2. of those, fewest spanning nodes;
--   3. fewest TP groups spanning racks;
--   4. fewest pipelines spanning racks;
--   5. fewest cross-rack hops between consecutive pipeline stages.
-- A unit is tier 1 inside one NVLink domain (of a node, or of a multi-node
-- domain: GB200 NVL72, Slurm topology/block), tier 2 inside one node across
-- its domains, tier 3 across nodes. Per rack:
--   t1  = whole units inside the node domains, plus whole units from what
--         each multi-node domain has left over (its nodes pooled; one
--         node's domain first, so a unit spans trays only when it must);
--   t2  = whole units from what each other node has left over;
--   cap = floor(GPUs of the rack / size), the most units the rack can hold
--         at all; t3 = cap - t1 - t2 more units span the rack's nodes.
-- Racks are disjoint, so with need units in all and T1, T2, CAP the sums:
-- objective 1 is max(0, need - T1), objective 2 max(0, need - T1 - T2),
-- objective 3 max(0, need - CAP), and every placement reaching them uses
-- u[r] units of rack r with lo[r] <= u[r] <= hi[r] (par3d.unit_bounds),
-- tier by tier (a rack cannot hold more units of a tier than it has, and
-- the better tier is used up first everywhere before the next is touched).
-- Which u inside those bounds is best is a question of pipelines only
-- (par3d.rack_counts).
---------------------------------------------------------------------------

-- Plain copies of the NVLink domain lists of a node, made once per distinct
-- `domains` table: nodes of one topology share theirs (docs/policies.md), so
-- a 16,384-node cluster of one machine type copies one list, and the loops
-- below read plain tables instead of going through read-only proxies.
-- Returns lists, lens (#gpus of each domain, as the proxy's # reports it).
local function domain_lists(cache, domains)
  local d = cache[domains]
  if not d then
    local lists, lens = {}, {}
    for k, gpus in ipairs(domains) do
      local l = {}
      for j, g in ipairs(gpus) do l[j] = g end
      lists[k], lens[k] = l, #gpus
    end
    d = {lists, lens}
    cache[domains] = d
  end
  return d[1], d[2]
end

-- Whether the GPUs gpus (0-based indices) of node nd close a cycle of
-- NVLink links through all of them: NCCL then rings their all-reduces over
-- NVLink although not every pair is linked (DGX-1 hybrid cube-mesh). The
-- same test as check_links.c, so the note and the links table agree.
local function nvlink_ring(nd, gpus)
  local nv, n = nd.nvlink, #gpus
  if n < 3 or n > 16 or not nv then return false end
  local used = {true}
  local function dfs(at, depth)
    if depth == n then return (nv[gpus[at] + 1][gpus[1] + 1] or 0) > 0 end
    for i = 2, n do
      if not used[i] and (nv[gpus[at] + 1][gpus[i] + 1] or 0) > 0 then
        used[i] = true
        if dfs(i, depth + 1) then return true end
        used[i] = false
      end
    end
    return false
  end
  return dfs(1, 1)
end

-- par3d.capacity(cluster, seq, size) -> C: the GPUs in walking order
-- (C.sn[p], C.sg[p]: node and GPU of slot p) and, in C.racks, every rack in
-- order of first appearance in seq: {index=, name=, gpus=, t1=, t2=, t3=,
-- cap=, u1 = {tier-1 units: a first slot (the unit is size consecutive
-- slots) or a list of slots}, left = {per node with GPUs left over outside
-- multi-node domains: list of slots}, rest = {other slots left over}}.
function par3d.capacity(cluster, seq, size)
  local nodes = cluster.nodes
  local sn, sg = {}, {}
  local racks, byidx, rackof = {}, {}, {}
  local cache = {}
  local nslots = 0
  for _, i in ipairs(seq) do
    local nd = nodes[i]
    local r = nd.rack_index
    rackof[i] = r
    local rk = byidx[r]
    if not rk then
      rk = {index = r, name = nd.rack, gpus = 0, u1 = {}, left = {}, rest = {}, t2 = 0, pools = {}, pool_order = {}}
      byidx[r] = rk
      racks[#racks + 1] = rk
    end
    local lists, lens = domain_lists(cache, nd.domains)
    if #lists > 1 then
      -- a unit of the whole node whose NVLink closes a ring through all its
      -- GPUs (DGX-1, tp=8) stays on NVLink: one domain for this size
      local all = {}
      for k = 1, #lists do
        for j = 1, lens[k] do all[#all + 1] = lists[k][j] end
      end
      if #all == size and nvlink_ring(nd, all) then lists, lens = {all}, {size} end
    end
    local u1, left = rk.u1, nil
    local before = nslots
    for k = 1, #lists do
      local gpus, len = lists[k], lens[k]
      local first = nslots + 1
      fill(sn, first, len, i)
      move(gpus, 1, len, first, sg)
      nslots = nslots + len
      local whole = len // size
      for u = 0, whole - 1 do u1[#u1 + 1] = first + u * size end
      if whole * size < len then
        left = left or {}
        for p = first + whole * size, nslots do left[#left + 1] = p end
      end
    end
    rk.gpus = rk.gpus + nslots - before
    if left then
      local mn = nd.nvlink_domain_index
      if mn then
        local pool = rk.pools[mn]
        if not pool then
          pool = {}
          rk.pools[mn] = pool
          rk.pool_order[#rk.pool_order + 1] = mn
        end
        for _, p in ipairs(left) do pool[#pool + 1] = p end
      else
        rk.left[#rk.left + 1] = left
        rk.t2 = rk.t2 + #left // size
      end
    end
  end
  for _, rk in ipairs(racks) do
    local added = false
    for _, mn in ipairs(rk.pool_order) do
      local pool = rk.pools[mn]
      local whole = #pool // size
      for u = 0, whole - 1 do
        local s = {}
        for t = 1, size do s[t] = pool[u * size + t] end
        rk.u1[#rk.u1 + 1] = s
        added = true
      end
      for q = whole * size + 1, #pool do rk.rest[#rk.rest + 1] = pool[q] end
    end
    rk.pools, rk.pool_order = nil, nil
    if added then
      -- keep the rack's tier-1 units in walking order of their first slot
      local function first(u) return type(u) == "table" and u[1] or u end
      table.sort(rk.u1, function(x, y) return first(x) < first(y) end)
    end
    rk.t1 = #rk.u1
    rk.cap = rk.gpus // size
    rk.t3 = rk.cap - rk.t1 - rk.t2
  end
  return {sn = sn, sg = sg, nslots = nslots, racks = racks, size = size, rackof = rackof}
end

-- par3d.unit_bounds(C, need) -> lo, hi (per rack of C.racks, by position),
-- cross, tiers: the units each rack must and may hold in a placement that
-- reaches objectives 1-3 (see above), the units that must span racks, and
-- {t1=, t2=, t3=, cross=} units of each tier such a placement uses.
function par3d.unit_bounds(C, need)
  local T1, T2, CAP = 0, 0, 0
  for _, rk in ipairs(C.racks) do
    T1, T2, CAP = T1 + rk.t1, T2 + rk.t2, CAP + rk.cap
  end
  local lo, hi = {}, {}
  for k, rk in ipairs(C.racks) do
    if need <= T1 then
      lo[k], hi[k] = 0, rk.t1
    elseif need <= T1 + T2 then
      lo[k], hi[k] = rk.t1, rk.t1 + rk.t2
    elseif need <= CAP then
      lo[k], hi[k] = rk.t1 + rk.t2, rk.cap
    else
      lo[k], hi[k] = rk.cap, rk.cap
    end
  end
  local t1 = math.min(need, T1)
  local t2 = math.min(need - t1, T2)
  local cross = math.max(0, need - CAP)
  return lo, hi, cross, {t1 = t1, t2 = t2, t3 = need - t1 - t2 - cross, cross = cross, T1 = T1, T2 = T2, CAP = CAP}
end

-- Materialise units. par3d.units(cluster, seq, size, need [, notes, counts,
-- C]) returns U = {n=, size=, node={}, gpu={}, rack={}, tier={}}: unit u
-- owns slots (u-1)*size+1 .. u*size of U.node / U.gpu, U.rack[u] is the
-- rack index of its first GPU, U.tier[u] 1, 2 or 3 (above). counts[k] is
-- how many units to take from the k-th rack of C.racks (default: within
-- par3d.unit_bounds, racks filled in walking order); each rack gives its
-- tier-1 units first (walking order), then tier 2, then tier 3; units that
-- must span racks come last, cut from what is left in walking order. Units
-- come rack by rack, each rack's in walking order of their first GPU.
-- U.degraded lists what the TP rule could not have, as records {rule =
-- "TP", kind =, count =, of = need, size =, text =}; notes, when given,
-- gets their text.
function par3d.units(cluster, seq, size, need, notes, counts, C)
  C = C or par3d.capacity(cluster, seq, size)
  local lo, hi, cross, tiers = par3d.unit_bounds(C, need)
  if not counts then
    counts = par3d.rack_counts(lo, hi, 1, need - cross)
  end
  local sn, sg = C.sn, C.sg
  local Unode, Ugpu, Urack, Utier = {}, {}, {}, {}
  local count, o = 0, 0
  local spans_mn, n2, n2ring, n3 = 0, 0, 0, 0
  -- one unit: x is a first slot (size consecutive slots) or a slot list
  local function emit(x, tier, rackidx)
    count = count + 1
    if type(x) == "table" then
      local n0, multi = sn[x[1]], false
      for t = 1, size do
        local p = x[t]
        local nd = sn[p]
        Unode[o + t], Ugpu[o + t] = nd, sg[p]
        if nd ~= n0 then multi = true end
      end
      if tier == 1 and multi then
        spans_mn = spans_mn + 1
      elseif tier > 1 then
        tier = multi and 3 or 2
        if multi then
          n3 = n3 + 1
        else
          local g = {}
          for t = 1, size do g[t] = sg[x[t]] end
          if nvlink_ring(cluster.nodes[n0], g) then n2ring = n2ring + 1 else n2 = n2 + 1 end
        end
      end
    else
      move(sn, x, x + size - 1, o + 1, Unode)
      move(sg, x, x + size - 1, o + 1, Ugpu)
    end
    o = o + size
    Utier[count], Urack[count] = tier, rackidx
  end
  local function first(x) return type(x) == "table" and x[1] or x end
  local leftover = {} -- slots of each rack no unit took, for cross-rack units
  for k, rk in ipairs(C.racks) do
    local want = counts[k] or 0
    local take1 = math.min(want, rk.t1)
    local u1 = rk.u1
    if want == take1 and cross == 0 then
      for j = 1, take1 do emit(u1[j], 1, rk.index) end
    else
      -- lower tiers exist only once all of the rack's tier-1 units are
      -- taken (counts within par3d.unit_bounds), so no tier-1 GPU is free
      local pick, tier = {}, {}
      for j = 1, take1 do pick[j], tier[j] = u1[j], 1 end
      local free, got = {}, take1
      for _, l in ipairs(rk.left) do
        local use = math.min(#l // size, want - got)
        for u = 0, use - 1 do
          local s = {}
          for t = 1, size do s[t] = l[u * size + t] end
          pick[#pick + 1], tier[#pick + 1] = s, 2
        end
        got = got + use
        for q = use * size + 1, #l do free[#free + 1] = l[q] end
      end
      for _, p in ipairs(rk.rest) do free[#free + 1] = p end
      table.sort(free)
      local use = math.min(#free // size, want - got)
      for u = 0, use - 1 do
        local s = {}
        for t = 1, size do s[t] = free[u * size + t] end
        pick[#pick + 1], tier[#pick + 1] = s, 3
      end
      got = got + use
      if got < want then
        error(string.format("rack %s: only %d units of %d GPUs, %d asked", rk.name, got, size, want), 2)
      end
      local rest = {}
      for q = use * size + 1, #free do rest[#rest + 1] = free[q] end
      leftover[k] = rest
      local ids = {}
      for j = 1, #pick do ids[j] = j end
      table.sort(ids, function(x, y) return first(pick[x]) < first(pick[y]) end)
      for _, j in ipairs(ids) do emit(pick[j], tier[j], rk.index) end
    end
  end
  if cross > 0 then
    local free = {}
    for k = 1, #C.racks do
      for _, p in ipairs(leftover[k] or {}) do free[#free + 1] = p end
    end
    table.sort(free)
    if #free < cross * size then
      error(string.format("only %d GPUs left for %d units of %d", #free, cross, size), 2)
    end
    for u = 0, cross - 1 do
      local s = {}
      for t = 1, size do s[t] = free[u * size + t] end
      emit(s, 3, C.rackof[sn[s[1]]])
    end
  end
  -- what the TP rule could not have, as records (par3d.tp_groups)
  local degraded = {}
  local function say(kind, n, fmt, ...) -- n TP groups could not
    if n > 0 then
      degraded[#degraded + 1] = {rule = "TP", kind = kind, count = n, of = need, size = size,
        text = string.format(fmt, ...)}
    end
  end
  say("tp_on_multinode_nvlink", spans_mn,
    "TP rule: %d TP groups of %d GPUs span nodes inside a multi-node NVLink domain; they stay on NVLink",
    spans_mn, size)
  say("tp_spans_cliques_ring", n2ring,
    "TP rule: %d of %d TP groups span NVLink cliques of one node; their GPUs' NVLink links still close a ring (hybrid cube-mesh), so NCCL keeps their all-reduces on NVLink, at lower bandwidth than inside a clique: the NVLink cliques hold only %d whole groups of tp=%d",
    n2ring, need, tiers.T1, size)
  say("tp_spans_domains", n2,
    "TP rule degraded: %d of %d TP groups span several NVLink domains of one node, so their all-reduces leave NVLink: the NVLink domains hold only %d whole groups of tp=%d",
    n2, need, tiers.T1, size)
  local n3r = n3 - cross
  say("tp_spans_nodes", n3r,
    "TP rule degraded: %d of %d TP groups span nodes of one rack, so their all-reduces run over the network: the NVLink domains hold %d whole groups of tp=%d and what single nodes have left %d more",
    n3r, need, tiers.T1, size, tiers.T2)
  say("tp_spans_racks", cross,
    "TP rule degraded: %d of %d TP groups span racks, so their all-reduces cross racks: the racks hold only %d whole groups of tp=%d",
    cross, need, tiers.CAP, size)
  local U = {n = count, size = size, node = Unode, gpu = Ugpu, rack = Urack, tier = Utier, degraded = degraded}
  for _, d in ipairs(notes and degraded or {}) do notes[#notes + 1] = d.text end
  return U
end
