-- SPDX-License-Identifier: BSD-3-Clause
-- par3d.lua — the helper module every placement policy sees as the global
-- `par3d` (docs/policies.md lists each function). Pure Lua, no I/O: it runs
-- inside the same sandbox as the policy.
--
-- Conventions: node numbers are 1-based indices into cluster.nodes; GPU
-- numbers are 0-based PCI-order indices on their node (as in the result a
-- policy returns); ranks and mesh coordinates are 0-based.

local par3d = {}
-- The C core (placement/policy/lua_par3d.c): the mesh arithmetic of the C
-- side itself, passed in as this chunk's argument.
local core = ...

par3d.DIMS = {"tp", "cp", "ep", "dp", "pp"}
-- every dimension a rank has a coordinate in: the dense grid's tp, cp, dp,
-- pp and the expert grid's etp, ep, edp (docs/policies.md)
par3d.ALL_DIMS = {"tp", "cp", "ep", "dp", "pp", "etp", "edp"}

---------------------------------------------------------------------------
-- Mesh arithmetic (Megatron-LM's RankGenerator), computed by the C core:
-- the order string lists the dimensions fastest-varying first; the dense
-- grid tp*cp*dp*pp and the expert grid etp*ep*edp*pp share it (etp takes
-- tp's place, edp dp's, cp has size 1 there). rank = sum(coord[d] *
-- stride[d]) within each grid.
---------------------------------------------------------------------------

local Mesh = {}
Mesh.__index = Mesh

-- "tp-pp-dp" -> {"tp","pp","dp","cp","ep"}: dims left out are appended in
-- the default order (they must have size 1).
function par3d.parse_order(s)
  return core.parse_order(s)
end

-- par3d.mesh(job [, order]) -> mesh with fields order (list), size, stride
-- (tables keyed by dim name, etp and edp included) and world. order
-- defaults to job.order. Refuses what Megatron refuses, with its reason.
function par3d.mesh(job, order)
  if type(order) == "table" then order = table.concat(order, "-") end
  return setmetatable(core.mesh(job, order), Mesh)
end

-- mesh:rank{tp=, cp=, dp=, pp=} (missing coordinates count as 0)
function Mesh:rank(c) return core.rank(self, c) end

-- mesh:coords(rank) -> {tp=, cp=, ep=, dp=, pp=, etp=, edp=}
function Mesh:coords(r) return core.coords(self, r) end

-- mesh:group(dim, rank) -> the ranks of rank's group of dim, ascending
function Mesh:group(dim, r) return core.group(self, dim, r) end

-- mesh:groups(dim) -> every group of dim, ordered by their smallest rank
function Mesh:groups(dim) return core.groups(self, dim) end

function par3d.rank_of(mesh, coords) return mesh:rank(coords) end
function par3d.coords_of(mesh, rank) return mesh:coords(rank) end
function par3d.groups(mesh, dim) return mesh:groups(dim) end

---------------------------------------------------------------------------
-- Sorting
---------------------------------------------------------------------------

-- Sorts list in place by key(x) (numbers or strings), keeping the original
-- order among equal keys (table.sort alone is not stable). Returns list.
function par3d.stable_sort(list, key)
  local n, idx, keys = #list, {}, {}
  for i = 1, n do
    idx[i] = i
    keys[i] = key(list[i])
  end
  table.sort(idx, function(a, b)
    local ka, kb = keys[a], keys[b]
    if ka ~= kb then return ka < kb end
    return a < b
  end)
  local copy = {}
  for i = 1, n do copy[i] = list[idx[i]] end
  for i = 1, n do list[i] = copy[i] end
  return list
end

---------------------------------------------------------------------------
-- Grouping the hardware
---------------------------------------------------------------------------

-- The nodes grouped by key(nd) (nil: left out), groups in the order their
-- first node appears: {{name=, index=, nodes={node numbers in list order}}, ...};
-- name(nd) and index(nd) describe a group by its first node.
local function group_nodes(cluster, key, name, index)
  local out, at = {}, {}
  for i, nd in ipairs(cluster.nodes) do
    local k = key(nd)
    if k ~= nil then
      local e = at[k]
      if not e then
        e = {name = name(nd), index = index(nd), nodes = {}}
        at[k] = e
        out[#out + 1] = e
      end
      e.nodes[#e.nodes + 1] = i
    end
  end
  return out
end

-- Racks in the order their first node appears in the node list:
-- {{name=, index=, nodes={node numbers in list order}}, ...}
function par3d.racks(cluster)
  local function ri(nd) return nd.rack_index end
  return group_nodes(cluster, ri, function(nd) return nd.rack end, ri)
end

-- Multi-node NVLink domains (GB200 NVL72, Slurm topology/block) in order of
-- first appearance: {{name=, index=, nodes={...}}, ...}. Nodes outside any
-- such domain are left out.
function par3d.nvlink_domains(cluster)
  local function di(nd) return nd.nvlink_domain_index end
  return group_nodes(cluster, di, function(nd) return nd.nvlink_domain end, di)
end

-- Every NVLink domain inside a node, nodes in list order (or in the order
-- of the node numbers given): {{node=, domain= (0-based), gpus={...}}, ...}
function par3d.gpu_domains(cluster, nodes)
  local out = {}
  local list = nodes or {}
  if not nodes then
    for i = 1, #cluster.nodes do list[i] = i end
  end
  for _, i in ipairs(list) do
    for d, gpus in ipairs(cluster.nodes[i].domains) do
      local g = {}
      for k, x in ipairs(gpus) do g[k] = x end
      out[#out + 1] = {node = i, domain = d - 1, gpus = g}
    end
  end
  return out
end

-- The order in which placement walks the nodes: racks in order of first
-- appearance (so the job's first node comes first), each rack's nodes in
-- list order, except that the nodes of one multi-node NVLink domain stay
-- together at the place of the first of them. Slurm lists nodes
-- alphabetically, which may interleave racks; this undoes that.
function par3d.node_sequence(cluster)
  local nodes, seq = cluster.nodes, {}
  for _, rk in ipairs(par3d.racks(cluster)) do
    local members, done = {}, {}
    for _, i in ipairs(rk.nodes) do
      local d = nodes[i].nvlink_domain_index
      if d then
        local m = members[d]
        if not m then
          m = {}
          members[d] = m
        end
        m[#m + 1] = i
      end
    end
    for _, i in ipairs(rk.nodes) do
      local d = nodes[i].nvlink_domain_index
      if not d then
        seq[#seq + 1] = i
      elseif not done[d] then
        done[d] = true
        for _, j in ipairs(members[d]) do seq[#seq + 1] = j end
      end
    end
  end
  return seq
end

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
      for j = 1, len do
        nslots = nslots + 1
        sn[nslots], sg[nslots] = i, gpus[j]
      end
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

---------------------------------------------------------------------------
-- Pipelines at the level of racks. k blocks of `per` units each (a block is
-- the cp*ep*pp units of one model replica; with cp = ep = 1 a pipeline)
-- are cut from u[r] units of each rack r. A block inside one rack is pure.
-- Given u, at most sum floor(u[r] / per) blocks are pure, and using that
-- many is best (breaking one only adds a mixed block); the remainders
-- f[r] = u[r] mod per (the fragments) fill the m = k - pure mixed blocks.
-- Laid end to end in some order and cut every `per` units, fragments make
-- the mixed blocks; a block's cross-rack hops are the racks it touches - 1,
-- in all #fragments - q where q is how many times the running sum lands on
-- a multiple of per (a fragment split over two blocks costs one hop more).
-- par3d.fragment_order finds the order with the most such landings
-- (exhaustively over subsets when there are at most 12 fragments, else
-- largest first), so the cost of u is (m, #fragments - q): objectives 4
-- and 5 divided by tp.
---------------------------------------------------------------------------

-- frags: list of sizes (each 1..per-1). Returns order (list of indices into
-- frags) and q.
function par3d.fragment_order(frags, per)
  local n = #frags
  local idx = {}
  for i = 1, n do idx[i] = i end
  if n == 0 then return idx, 0 end
  if n > 12 then
    table.sort(idx, function(a, b)
      if frags[a] ~= frags[b] then return frags[a] > frags[b] end
      return a < b
    end)
    -- largest first, then whatever exactly closes the open block
    local out, used, q, sum = {}, {}, 0, 0
    for _ = 1, n do
      local want = (per - sum % per) % per
      local pick
      if want > 0 then
        for _, i in ipairs(idx) do
          if not used[i] and frags[i] == want then pick = i break end
        end
      end
      if not pick then
        for _, i in ipairs(idx) do
          if not used[i] then pick = i break end
        end
      end
      used[pick] = true
      out[#out + 1] = pick
      sum = sum + frags[pick]
      if sum % per == 0 then q = q + 1 end
    end
    return out, q
  end
  -- best[mask]: most landings ordering the fragments in mask first; the
  -- sum of a mask is fixed, so whether it lands does not depend on order
  local full = (1 << n) - 1
  local best, from, sum = {[0] = 0}, {}, {[0] = 0}
  for mask = 1, full do
    local low = mask & -mask
    local b = 0
    while (1 << b) ~= low do b = b + 1 end
    sum[mask] = sum[mask ~ low] + frags[b + 1]
    local land = (sum[mask] % per == 0) and 1 or 0
    local bv, bi = -1, nil
    for i = 0, n - 1 do
      local bit = 1 << i
      if mask & bit ~= 0 then
        local v = best[mask ~ bit]
        if v > bv then bv, bi = v, i end
      end
    end
    best[mask], from[mask] = bv + land, bi
  end
  local out, mask = {}, full
  while mask ~= 0 do
    local i = from[mask]
    table.insert(out, 1, i + 1)
    mask = mask ~ (1 << i)
  end
  return out, best[full]
end

-- The cost of unit counts u: mixed blocks, cross-rack hops per lane.
function par3d.rack_cost(u, per, k)
  local pure, frags = 0, {}
  for r = 1, #u do
    pure = pure + u[r] // per
    local f = u[r] % per
    if f > 0 then frags[#frags + 1] = f end
  end
  local _, q = par3d.fragment_order(frags, per)
  return k - pure, #frags - q
end

local function better(m1, h1, m2, h2)
  return m1 < m2 or (m1 == m2 and h1 < h2)
end

-- par3d.rack_counts(lo, hi, per, k) -> u, mixed, hops: units per rack
-- (lo[r] <= u[r] <= hi[r], sum k*per) for k blocks of per units, chosen for
-- objectives 4 and 5. Greedy: complete the fragments the lower bounds
-- force (cheapest first), whole blocks rack by rack in walking order, the
-- remainder into the racks with most room; then a local search moves 1 to
-- per units between two racks while that lowers (mixed, hops), when some
-- block is mixed and there are at most 64 racks.
function par3d.rack_counts(lo, hi, per, k)
  local n = #lo
  local u, room = {}, 0
  local R = k * per
  for r = 1, n do
    u[r] = lo[r]
    R = R - lo[r]
    room = room + hi[r] - lo[r]
  end
  if R < 0 or R > room then
    error(string.format("cannot place %d units of blocks of %d within the racks' bounds", k * per, per), 2)
  end
  -- 1. complete forced fragments, cheapest first
  local open = {}
  for r = 1, n do
    local f = u[r] % per
    if f > 0 and u[r] + per - f <= hi[r] then open[#open + 1] = r end
  end
  table.sort(open, function(a, b)
    local ca, cb = per - u[a] % per, per - u[b] % per
    if ca ~= cb then return ca < cb end
    return a < b
  end)
  for _, r in ipairs(open) do
    local c = per - u[r] % per
    if c <= R then
      u[r] = u[r] + c
      R = R - c
    end
  end
  -- 2. whole blocks, racks in walking order
  for r = 1, n do
    if R < per then break end
    local b = math.min((hi[r] - u[r]) // per, R // per)
    u[r] = u[r] + b * per
    R = R - b * per
  end
  -- 3. the rest where there is most room
  while R > 0 do
    local br, bv = nil, 0
    for r = 1, n do
      if hi[r] - u[r] > bv then br, bv = r, hi[r] - u[r] end
    end
    local t = math.min(bv, R)
    u[br] = u[br] + t
    R = R - t
  end
  local m, h = par3d.rack_cost(u, per, k)
  if (m > 0 or h > 0) and n <= 64 then
    local improved = true
    local rounds = 0
    while improved and rounds < 200 do
      improved = false
      rounds = rounds + 1
      for a = 1, n do
        for b = 1, n do
          if a ~= b then
            local dmax = math.min(u[a] - lo[a], hi[b] - u[b], per)
            for d = 1, dmax do
              u[a], u[b] = u[a] - d, u[b] + d
              local m2, h2 = par3d.rack_cost(u, per, k)
              if better(m2, h2, m, h) then
                m, h, improved = m2, h2, true
                break
              end
              u[a], u[b] = u[a] + d, u[b] - d
            end
          end
        end
      end
    end
  end
  return u, m, h
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
      for t = 0, size - 1 do
        Unode[o + t + 1], Ugpu[o + t + 1] = sn[x + t], sg[x + t]
      end
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
  local U = {n = count, size = size, node = Unode, gpu = Ugpu, rack = Urack, tier = Utier}
  if notes then
    if spans_mn > 0 then
      notes[#notes + 1] = string.format(
        "TP rule: %d TP groups of %d GPUs span nodes inside a multi-node NVLink domain; they stay on NVLink",
        spans_mn, size)
    end
    if n2ring > 0 then
      notes[#notes + 1] = string.format(
        "TP rule: %d of %d TP groups span NVLink cliques of one node; their GPUs' NVLink links still close a ring (hybrid cube-mesh), so NCCL keeps their all-reduces on NVLink, at lower bandwidth than inside a clique: the NVLink cliques hold only %d whole groups of tp=%d",
        n2ring, need, tiers.T1, size)
    end
    if n2 > 0 then
      notes[#notes + 1] = string.format(
        "TP rule degraded: %d of %d TP groups span several NVLink domains of one node, so their all-reduces leave NVLink: the NVLink domains hold only %d whole groups of tp=%d",
        n2, need, tiers.T1, size)
    end
    local n3r = n3 - cross
    if n3r > 0 then
      notes[#notes + 1] = string.format(
        "TP rule degraded: %d of %d TP groups span nodes of one rack, so their all-reduces run over the network: the NVLink domains hold %d whole groups of tp=%d and what single nodes have left %d more",
        n3r, need, tiers.T1, size, tiers.T2)
    end
    if cross > 0 then
      notes[#notes + 1] = string.format(
        "TP rule degraded: %d of %d TP groups span racks, so their all-reduces cross racks: the racks hold only %d whole groups of tp=%d",
        cross, need, tiers.CAP, size)
    end
  end
  return U
end

---------------------------------------------------------------------------
-- Packing units into blocks that should share a rack (pipelines).
-- par3d.pack(U, per, count [, notes, label, why]) cuts `count` blocks of
-- `per` units from U: with more units than needed it first chooses how
-- many to take from each rack (par3d.rack_counts); each rack's units in
-- order give its whole blocks, its remainder is a fragment, and the
-- fragments, ordered by par3d.fragment_order, are cut into the blocks
-- that must span racks (each touching the fewest racks, its units rack by
-- rack, so its cross-rack hops are the racks it touches - 1). Returns a
-- flat list of unit numbers: block g (0-based) is order[g*per+1 ..
-- (g+1)*per]; blocks are ordered by their first unit, so the first unit of
-- the walk stays first. `why`, when given, ends the note on blocks that
-- span racks (the caller knows the cause better).
---------------------------------------------------------------------------

function par3d.pack(U, per, count, notes, label, why)
  local byrack, racks = {}, {}
  for u = 1, U.n do
    local r = U.rack[u]
    local l = byrack[r]
    if not l then
      l = {}
      byrack[r] = l
      racks[#racks + 1] = r
    end
    l[#l + 1] = u
  end
  if U.n < count * per then
    error(string.format("only %d units for %d groups of %d", U.n, count, per), 2)
  end
  local lo, hi = {}, {}
  for k, r in ipairs(racks) do
    hi[k] = #byrack[r]
    lo[k] = U.n == count * per and hi[k] or 0
  end
  local take = par3d.rack_counts(lo, hi, per, count)
  local groups, frags, fsize = {}, {}, {}
  local largest = 0
  for k, r in ipairs(racks) do
    local l, n = byrack[r], take[k]
    if hi[k] > largest then largest = hi[k] end
    local whole = n // per
    for g = 0, whole - 1 do
      local grp = {}
      for q = 1, per do grp[q] = l[g * per + q] end
      groups[#groups + 1] = grp
    end
    if n > whole * per then
      local f = {}
      for q = whole * per + 1, n do f[#f + 1] = l[q] end
      frags[#frags + 1] = f
      fsize[#fsize + 1] = #f
    end
  end
  local crossing = count - #groups
  if crossing > 0 then
    local forder = par3d.fragment_order(fsize, per)
    local run = {}
    for _, i in ipairs(forder) do
      for _, u in ipairs(frags[i]) do run[#run + 1] = u end
    end
    for g = 0, crossing - 1 do
      local grp = {}
      for q = 1, per do grp[q] = run[g * per + q] end
      groups[#groups + 1] = grp
    end
    if notes then
      notes[#notes + 1] = string.format(
        "%s rule degraded: %d of %d %ss span racks (each needs %d GPUs; %s)",
        label or "group", crossing, count, label or "group", per * U.size,
        why or string.format("the racks' units hold only %d whole ones, the largest rack offers %d usable GPUs",
          count - crossing, largest * U.size))
    end
  end
  table.sort(groups, function(x, y) return x[1] < y[1] end)
  local order = {}
  for g, grp in ipairs(groups) do
    for q = 1, per do order[(g - 1) * per + q] = grp[q] end
  end
  return order
end

---------------------------------------------------------------------------
-- The layout megatron.lua and devicemesh.lua share. Physically nested, from
-- the innermost: a TP group (one unit, one NVLink domain), the cp*ep units
-- of one pipeline stage (neighbours), the pp stages of one model replica
-- (consecutive, inside one rack: stage k+1 on the same or the next node),
-- and the dp replicas over the rest. The rank of each GPU follows from its
-- coordinates through the job's order string, so any order string gets the
-- same physical layout of its groups. Returns result, notes.
---------------------------------------------------------------------------

function par3d.place_nested(cluster, job)
  local m = par3d.mesh(job)
  local sz, st = m.size, m.stride
  -- ep has size 1 in the dense grid this nests; par3d.place_ep keeps EP
  -- groups together when ep > 1
  local tp, cp, ep, pp, dp = sz.tp, sz.cp, 1, sz.pp, sz.dp
  local notes = {}
  local inner = cp * ep
  local per = inner * pp
  local seq, need = par3d.node_sequence(cluster), m.world // tp
  local C = par3d.capacity(cluster, seq, tp)
  local lo, hi, cross = par3d.unit_bounds(C, need)
  -- how many units each rack gives: for the pipelines (objectives 4, 5)
  -- within what the TP rule allows (1-3); units forced across racks leave
  -- no choice
  local counts = cross > 0 and hi or par3d.rack_counts(lo, hi, per, dp)
  local what = pp > 1 and "pipeline" or "replica"
  local fit, fit_any = 0, 0
  for k, rk in ipairs(C.racks) do
    fit, fit_any = fit + hi[k] // per, fit_any + rk.cap // per
  end
  local why
  if cross > 0 then
    why = "some TP groups themselves span racks"
  elseif fit_any < dp then
    why = string.format("the racks hold only %d whole %ss of %d GPUs", fit_any, what, per * tp)
  elseif fit < dp then
    why = string.format("the racks could hold %d whole %ss of %d GPUs, but only %d with every TP group placed as the TP rule asks first",
      fit_any, what, per * tp, fit)
  else
    why = string.format("placing every TP group as the TP rule asks first fixes how many some racks must hold, and those do not make whole %ss",
      what)
  end
  local U = par3d.units(cluster, seq, tp, need, notes, counts, C)
  local order = par3d.pack(U, per, dp, notes, what, why)
  local nodeof, gpuof = U.node, U.gpu
  local stp, scp, sep, sdp, spp = st.tp, st.cp, st.ep, st.dp, st.pp
  -- Filled in rank order, so res stays a plain array (filling it in walk
  -- order would scatter the keys into its hash part first).
  local res = {}
  for rank = 0, m.world - 1 do
    local t, c, e = (rank // stp) % tp, (rank // scp) % cp, (rank // sep) % ep
    local p, s = (rank // sdp) % dp, (rank // spp) % pp
    local k = (order[p * per + s * inner + e * cp + c + 1] - 1) * tp + t + 1
    res[rank + 1] = {rank = rank, node = nodeof[k], gpu = gpuof[k], tp = t, cp = c, dp = p, pp = s}
  end
  if res[1].node ~= 1 then
    local why
    if U.node[1] ~= 1 then
      why = string.format("that node has no NVLink domain with room for a TP group of %d", tp)
    else
      why = string.format("its rack %s cannot hold a whole %s of %d GPUs and other racks hold all of them",
        cluster.nodes[1].rack, pp > 1 and "pipeline" or "replica", per * tp)
    end
    notes[#notes + 1] = string.format("rank 0 rule degraded: rank 0 is on %s, not on the job's first node %s: %s",
      cluster.nodes[res[1].node].name, cluster.nodes[1].name, why)
  end
  return res, notes
end

---------------------------------------------------------------------------
-- EP-aware layout (megatron.lua uses it when ep > 1 or etp ~= tp). The
-- EP all-to-all is the heaviest traffic of an MoE layer, so the unit of
-- placement is an EP block: the smallest set of ranks closed under the TP
-- groups and the expert tp-ep groups (etp*ep ranks) that share ranks. Each
-- block goes inside one NVLink domain when it fits (8-GPU node, NVL72
-- block), else inside one node, else on consecutive nodes (one rack when
-- the rack has room); the pp blocks of one set of pipelines are packed
-- into one rack like place_nested's pipelines. Returns result, notes.
---------------------------------------------------------------------------

function par3d.place_ep(cluster, job)
  local m = par3d.mesh(job)
  local W, sz, st = m.world, m.size, m.stride
  local parent = {}
  for r = 0, W - 1 do parent[r] = r end
  local function find(x)
    while parent[x] ~= x do
      parent[x] = parent[parent[x]]
      x = parent[x]
    end
    return x
  end
  -- join every rank with its predecessor in its tp, etp and ep groups
  for _, dim in ipairs({"tp", "etp", "ep"}) do
    local s, n = st[dim], sz[dim]
    if n > 1 then
      for r = 0, W - 1 do
        if (r // s) % n ~= 0 then
          local a, b = find(r), find(r - s)
          if a < b then parent[b] = a elseif b < a then parent[a] = b end
        end
      end
    end
  end
  local members, roots = {}, {}
  for r = 0, W - 1 do
    local k = find(r)
    local l = members[k]
    if not l then
      l = {}
      members[k] = l
      roots[#roots + 1] = k
    end
    l[#l + 1] = r
  end
  local S = #members[roots[1]]
  local spp, pp = st.pp, sz.pp
  local stage0 = {}
  for _, k in ipairs(roots) do
    if #members[k] ~= S then return par3d.place_nested(cluster, job) end
    if (k // spp) % pp == 0 then stage0[#stage0 + 1] = k end
  end
  local nbundles = #stage0
  local notes = {}
  local U = par3d.units(cluster, par3d.node_sequence(cluster), S, W // S)
  local order = par3d.pack(U, pp, nbundles, notes, pp > 1 and "EP pipeline block" or "EP block")
  local res = {}
  local stp, ntp = st.tp, sz.tp
  for b, k in ipairs(stage0) do
    for s = 0, pp - 1 do
      local u = order[(b - 1) * pp + s + 1]
      local slot = (u - 1) * S
      -- the block's ranks, each TP group on consecutive slots
      local done = {}
      for _, r0 in ipairs(members[k]) do
        local r = r0 + s * spp
        if not done[r] then
          local base = r - ((r // stp) % ntp) * stp
          for i = 0, ntp - 1 do
            local q = base + i * stp
            done[q] = true
            slot = slot + 1
            res[q + 1] = {rank = q, node = U.node[slot], gpu = U.gpu[slot]}
          end
        end
      end
    end
  end
  -- TP groups are laid on consecutive slots of their block; inside a block
  -- that leaves NVLink some of them may straddle two domains: say so
  local domof, split, ntpg = {}, 0, 0
  for nd = 1, #cluster.nodes do
    local d = {}
    for k, gpus in ipairs(cluster.nodes[nd].domains) do
      for _, g in ipairs(gpus) do d[g] = k end
    end
    domof[nd] = d
  end
  for r = 0, W - 1, 1 do
    if (r // stp) % ntp == 0 then
      ntpg = ntpg + 1
      local a = res[r + 1]
      for i = 1, ntp - 1 do
        local b = res[r + i * stp + 1]
        if b.node ~= a.node or domof[b.node][b.gpu] ~= domof[a.node][a.gpu] then
          split = split + 1
          break
        end
      end
    end
  end
  if split > 0 then
    notes[#notes + 1] = string.format(
      "TP rule degraded: %d of %d TP groups span NVLink domains: they sit inside EP blocks of %d GPUs that do not fit one domain",
      split, ntpg, S)
  end
  if res[1].node ~= 1 then
    notes[#notes + 1] = string.format("rank 0 rule degraded: rank 0 is on %s, not on the job's first node %s: EP blocks of %d GPUs are placed where they fit best",
      cluster.nodes[res[1].node].name, cluster.nodes[1].name, S)
  end
  -- what each block got: 1 NVLink domain, 2 one node, 3 several nodes
  local count, in_rack, racks = {0, 0, 0}, 0, {}
  for u = 1, U.n do
    local t = U.tier[u]
    count[t] = count[t] + 1
    if t == 3 then
      local one = true
      for p = (u - 1) * S + 1, u * S do
        if cluster.nodes[U.node[p]].rack_index ~= U.rack[u] then one = false end
      end
      if one then in_rack = in_rack + 1 end
    end
  end
  local what = string.format("EP blocks of %d GPUs (tp=%d, etp=%d, ep=%d: the TP and expert tp-ep groups that share ranks)",
    S, sz.tp, sz.etp, sz.ep)
  if count[2] + count[3] == 0 then
    notes[#notes + 1] = string.format("EP rule: all %d %s sit inside one NVLink domain each, so every EP all-to-all stays on NVLink",
      U.n, what)
  else
    local largest = 0
    for _, nd in ipairs(cluster.nodes) do
      for _, d in ipairs(nd.domains) do
        if #d > largest then largest = #d end
      end
    end
    for _, d in ipairs(par3d.nvlink_domains(cluster)) do
      local g = 0
      for _, i in ipairs(d.nodes) do g = g + cluster.nodes[i].ngpus end
      if g > largest then largest = g end
    end
    notes[#notes + 1] = string.format(
      "EP rule degraded: %d of %d %s do not fit one NVLink domain (the largest has %d GPUs%s): %d stay inside one node, %d span nodes inside one rack, %d span racks; their all-to-alls leave NVLink",
      count[2] + count[3], U.n, what, largest, S > largest and "" or ", and not enough of them have room",
      count[2], in_rack, count[3] - in_rack)
  end
  return res, notes
end

---------------------------------------------------------------------------
-- Replacing a lost node (job.previous is set; docs/policies.md). Every rank
-- whose node is still in the cluster keeps its node and GPU; the ranks of
-- each failed node move, together, to one spare (cluster.nodes[i].spare):
-- the best is in the failed node's multi-node NVLink domain, else in its
-- rack, else the nearest rack (rack_distance), else any; ties go to list
-- order. GPU for GPU: a rank keeps its GPU index when the spare has the
-- same NVLink-domain structure (the same topology), else takes the spare's
-- GPUs domain by domain in PCI order. Every bundled policy calls this.
---------------------------------------------------------------------------

-- The GPU map old index -> spare index for a failed node's GPUs `gpus`.
local function gpu_map(spare, gpus, failed_domains)
  local map, same = {}, failed_domains ~= nil and #spare.domains == #failed_domains
  if same then
    for d, list in ipairs(spare.domains) do
      if #list ~= #failed_domains[d] then same = false end
    end
  end
  if same or not failed_domains then
    local ok = true
    for _, g in ipairs(gpus) do
      if g >= spare.ngpus then ok = false end
    end
    if ok then
      for _, g in ipairs(gpus) do map[g] = g end
      return map
    end
  end
  local free = {}
  for _, list in ipairs(spare.domains) do
    for _, x in ipairs(list) do free[#free + 1] = x end
  end
  table.sort(gpus)
  for k, g in ipairs(gpus) do
    if not free[k] then return nil end
    map[g] = free[k]
  end
  return map
end

function par3d.replace(cluster, job)
  local prev = job.previous
  local byname, result, notes = {}, {}, {}
  for i, nd in ipairs(cluster.nodes) do byname[nd.name] = i end
  local lost, order = {}, {}   -- failed node name -> {ranks=, gpus=}
  for r = 0, job.world - 1 do
    local p = prev.ranks[r + 1]
    local i = byname[p.node]
    if i and not cluster.nodes[i].spare then
      result[r + 1] = {rank = r, node = i, gpu = p.gpu}
    else
      local e = lost[p.node]
      if not e then
        e = {ranks = {}, gpus = {}}
        lost[p.node] = e
        order[#order + 1] = p.node
      end
      e.ranks[#e.ranks + 1] = r
      e.gpus[#e.gpus + 1] = p.gpu
    end
  end
  local info = {}
  for _, f in ipairs(prev.failed or {}) do info[f.name] = f end
  local rack_index = {}
  for _, rk in ipairs(par3d.racks(cluster)) do rack_index[rk.name] = rk.index end
  local taken = {}
  for _, name in ipairs(order) do
    local e, f = lost[name], info[name] or {}
    local best, best_key
    for i, nd in ipairs(cluster.nodes) do
      if nd.spare and not taken[i] and nd.ngpus >= #e.ranks then
        local key
        if f.nvlink_domain and nd.nvlink_domain == f.nvlink_domain then
          key = 0
        elseif f.rack and nd.rack == f.rack then
          key = 1
        else
          local d = 1000
          local a, b = rack_index[f.rack], rack_index[nd.rack]
          if a and b and cluster.rack_distance and cluster.rack_distance[a] then
            local x = cluster.rack_distance[a][b]
            if x and x >= 0 then d = x end
          end
          key = 2 + d
        end
        if not best_key or key < best_key then best, best_key = i, key end
      end
    end
    if not best then
      error(string.format("no spare node left for the %d ranks of lost node %s (every --spares node is in use " ..
        "or lost)", #e.ranks, name), 0)
    end
    taken[best] = true
    local spare = cluster.nodes[best]
    local map = gpu_map(spare, e.gpus, nil)
    if not map then
      error(string.format("spare node %s has %d GPUs, lost node %s ran %d ranks", spare.name, spare.ngpus,
        name, #e.ranks), 0)
    end
    for k, r in ipairs(e.ranks) do
      result[r + 1] = {rank = r, node = best, gpu = map[e.gpus[k]]}
    end
    local where = best_key == 0 and "same NVLink domain " .. f.nvlink_domain
      or best_key == 1 and "same rack " .. f.rack or "another rack: " .. spare.rack
    notes[#notes + 1] = string.format("replacement: the %d ranks of lost node %s moved to spare %s (%s); " ..
      "every other rank stayed where it was", #e.ranks, name, spare.name, where)
  end
  return result, notes
end

---------------------------------------------------------------------------
-- Choosing the hot spares (--spares K; docs/policies.md "Choosing the
-- spares"). par3drun calls the policy's spares(cluster, job) when it has
-- one, else this rule. cluster.nodes are the usable nodes (no --exclude'd
-- node); the result is a list of job.spares node names.
-- The rule: the spare units (racks; in a cluster with multi-node NVLink
-- domains, each rack's NVLink domains: par3d.spare_units), in the order
-- of their first node, take turns giving their last node not yet chosen,
-- while the unit keeps at least one node that runs ranks; when every unit
-- is down to one node, units keep taking turns giving their last node (a
-- unit may then run no rank at all). A spare thus sits in every rack (and
-- NVLink domain) that has room, so that a lost node's ranks can stay in
-- their rack, or on the NVLink fabric their tensor-parallel peers use.
---------------------------------------------------------------------------

-- Where spares are spread: {{name=, nodes={i, ...}}, ...} in the order of
-- first appearance. Racks; a node in a multi-node NVLink domain counts in
-- its (rack, domain) pair instead, so that two NVL36 domains of one rack
-- are two units. Nodes outside any domain stay with their rack.
function par3d.spare_units(cluster)
  return group_nodes(cluster,
    function(nd) return tostring(nd.rack_index) .. "/" .. tostring(nd.nvlink_domain_index or "") end,
    function(nd) return nd.nvlink_domain and (nd.rack .. "/" .. nd.nvlink_domain) or nd.rack end,
    function(nd) return nd.rack_index end)
end

function par3d.default_spares(cluster, job)
  local k = job.spares or 0
  local racks, out = par3d.spare_units(cluster), {}
  if k >= #cluster.nodes then
    error(string.format("--spares %d: only %d usable nodes, at least one must run ranks", k, #cluster.nodes), 0)
  end
  local left = {}
  for r, rk in ipairs(racks) do left[r] = #rk.nodes end
  for pass = 1, 2 do
    local gave = true
    while #out < k and gave do
      gave = false
      for r, rk in ipairs(racks) do
        if #out < k and left[r] > 0 and (pass == 2 or left[r] >= 2) then
          local i = rk.nodes[left[r]]
          left[r] = left[r] - 1
          out[#out + 1] = cluster.nodes[i].name
          gave = true
        end
      end
    end
  end
  return out
end

return par3d
