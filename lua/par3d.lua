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

-- Racks in the order their first node appears in the node list:
-- {{name=, index=, nodes={node numbers in list order}}, ...}
function par3d.racks(cluster)
  local out, at = {}, {}
  for i, nd in ipairs(cluster.nodes) do
    local r = nd.rack_index
    local e = at[r]
    if not e then
      e = {name = nd.rack, index = r, nodes = {}}
      at[r] = e
      out[#out + 1] = e
    end
    e.nodes[#e.nodes + 1] = i
  end
  return out
end

-- Multi-node NVLink domains (GB200 NVL72, Slurm topology/block) in order of
-- first appearance: {{name=, index=, nodes={...}}, ...}. Nodes outside any
-- such domain are left out.
function par3d.nvlink_domains(cluster)
  local out, at = {}, {}
  for i, nd in ipairs(cluster.nodes) do
    local d = nd.nvlink_domain_index
    if d then
      local e = at[d]
      if not e then
        e = {name = nd.nvlink_domain, index = d, nodes = {}}
        at[d] = e
        out[#out + 1] = e
      end
      e.nodes[#e.nodes + 1] = i
    end
  end
  return out
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
-- Units: blocks of `size` GPUs that should share one NVLink domain (a TP
-- group). par3d.units(cluster, seq, size, need [, notes]) returns
--   U = {n=, size=, node={}, gpu={}, rack={}, tier={}}
-- where unit u owns slots (u-1)*size+1 .. u*size of U.node / U.gpu, U.rack[u]
-- is the rack index of its first GPU and U.tier[u] says how good it is:
--   1  inside one NVLink domain (of a node, or a multi-node domain)
--   2  inside one node, across its NVLink domains (PCIe / CPU links)
--   3  across nodes (the network)
-- Units come in walking order (seq), so consecutive units are neighbours.
-- Only as many tier-2/3 units are formed as needed to reach `need`; when
-- tier 1 alone has enough, GPUs a unit cannot use well are left idle.
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

-- The block (index into bstart, ascending first slots) that holds slot p.
local function block_of(bstart, nblk, p)
  local lo, hi = 1, nblk
  while lo < hi do
    local mid = (lo + hi + 1) // 2
    if bstart[mid] <= p then lo = mid else hi = mid - 1 end
  end
  return lo
end

function par3d.units(cluster, seq, size, need, notes)
  local nodes = cluster.nodes
  -- Slots are the GPUs in walking order: sn, sg = node, gpu of each. Blocks
  -- (NVLink domains) and node positions in seq are runs of slots: block b
  -- holds slots bstart[b] .. bstart[b+1]-1, position k pstart[k] .. pstart[k+1]-1.
  local sn, sg = {}, {}
  local bstart, bbig, pstart = {}, {}, {}
  local nslots, nblk, npos = 0, 0, 0
  local largest_local = 0
  local cache, dl, mnof = {}, {}, {} -- per node position: domain lists, multi-node domain
  for pos, i in ipairs(seq) do
    local nd = nodes[i]
    local lists, lens = domain_lists(cache, nd.domains)
    dl[pos], mnof[pos] = lists, nd.nvlink_domain_index or false
    for k = 1, #lens do
      if lens[k] > largest_local then largest_local = lens[k] end
    end
  end
  local prev_mn = nil
  local spans_nodes = 0
  for pos, i in ipairs(seq) do
    npos = pos
    pstart[pos] = nslots + 1
    local mn = mnof[pos] or nil
    -- a multi-node domain is one block only when the unit does not fit
    -- inside a node's own domain: prefer keeping a unit on one node
    local big = mn and size > largest_local
    if big and mn ~= prev_mn then
      nblk = nblk + 1
      bstart[nblk], bbig[nblk] = nslots + 1, true
    end
    local lists = dl[pos]
    for k = 1, #lists do
      if not big then
        nblk = nblk + 1
        bstart[nblk], bbig[nblk] = nslots + 1, false
      end
      local gpus = lists[k]
      for j = 1, #gpus do
        nslots = nslots + 1
        sn[nslots], sg[nslots] = i, gpus[j]
      end
    end
    prev_mn = big and mn or nil
  end
  bstart[nblk + 1], pstart[npos + 1] = nslots + 1, nslots + 1

  -- Units: ufirst[u] is the first slot of unit u; a tier-1 unit owns the
  -- slots ufirst[u] .. ufirst[u]+size-1, any other one lists its slots in
  -- ulist[u] (nil for tier 1, which is all of them on regular clusters).
  local ufirst, ulist = {}, {}
  local count = 0
  -- tier 1: whole units inside each block; only a multi-node block's units
  -- can span nodes (qa, qb: the node positions of a unit's ends, advancing)
  local qa, qb = 1, 1
  for blk = 1, nblk do
    local a = bstart[blk]
    local k = (bstart[blk + 1] - a) // size
    for u = 0, k - 1 do
      local f = a + u * size
      count = count + 1
      ufirst[count] = f
      if bbig[blk] then
        while pstart[qa + 1] <= f do qa = qa + 1 end
        while pstart[qb + 1] <= f + size - 1 do qb = qb + 1 end
        if qa ~= qb then spans_nodes = spans_nodes + 1 end
      end
    end
  end
  local used
  if count < need then
    used = {}
    for u = 1, count do
      local f = ufirst[u]
      for p = f, f + size - 1 do used[p] = true end
    end
  end
  -- tier 2: what is left of each node, across its domains
  local tier2 = 0
  if count < need then
    for pos = 1, npos do
      if count >= need then break end
      local free = {}
      for p = pstart[pos], pstart[pos + 1] - 1 do
        if not used[p] then free[#free + 1] = p end
      end
      for u = 0, #free // size - 1 do
        if count >= need then break end
        local s = {}
        for t = 1, size do
          s[t] = free[u * size + t]
          used[s[t]] = true
        end
        count = count + 1
        tier2 = tier2 + 1
        ufirst[count], ulist[count] = s[1], s
      end
    end
  end
  -- tier 3: the rest, in walking order, across nodes
  local tier3 = 0
  if count < need then
    local free = {}
    for p = 1, nslots do
      if not used[p] then free[#free + 1] = p end
    end
    for u = 0, #free // size - 1 do
      if count >= need then break end
      local s = {}
      for t = 1, size do s[t] = free[u * size + t] end
      count = count + 1
      tier3 = tier3 + 1
      ufirst[count], ulist[count] = s[1], s
    end
  end
  if count < need then
    error(string.format("only %d GPUs for %d units of %d", nslots, need, size), 2)
  end
  if tier2 + tier3 > 0 then
    -- units in slot order of their first slot (all distinct: no ties)
    local idx = {}
    for u = 1, count do idx[u] = u end
    table.sort(idx, function(x, y) return ufirst[x] < ufirst[y] end)
    local f2, l2 = {}, {}
    for u = 1, count do
      f2[u], l2[u] = ufirst[idx[u]], ulist[idx[u]]
    end
    ufirst, ulist = f2, l2
  end

  local Unode, Ugpu, Urack, Utier = {}, {}, {}, {}
  local U = {n = count, size = size, node = Unode, gpu = Ugpu, rack = Urack, tier = Utier}
  local rackof = {} -- per node number, looked up once
  local o = 0
  for u = 1, count do
    local s, f = ulist[u], ufirst[u]
    if not s then
      for p = f, f + size - 1 do
        o = o + 1
        Unode[o], Ugpu[o] = sn[p], sg[p]
      end
      Utier[u] = 1
    else
      local same_blk, same_node = true, true
      local b1 = block_of(bstart, nblk, f)
      for t = 1, size do
        local p = s[t]
        Unode[o + t], Ugpu[o + t] = sn[p], sg[p]
        if same_blk and block_of(bstart, nblk, p) ~= b1 then same_blk = false end
        if sn[p] ~= sn[f] then same_node = false end
      end
      o = o + size
      Utier[u] = same_blk and 1 or (same_node and 2 or 3)
    end
    local ni = sn[f]
    local r = rackof[ni]
    if not r then
      r = nodes[ni].rack_index
      rackof[ni] = r
    end
    Urack[u] = r
  end
  if notes then
    if spans_nodes > 0 then
      notes[#notes + 1] = string.format(
        "TP rule: %d groups of %d GPUs span nodes inside a multi-node NVLink domain (a node's own NVLink domains hold at most %d GPUs); they stay on NVLink",
        spans_nodes, size, largest_local)
    end
    if tier2 > 0 then
      notes[#notes + 1] = string.format(
        "TP rule degraded: %d of %d TP groups span several NVLink domains of one node (tp=%d does not fit or divide the NVLink domains; the largest has %d GPUs), so their all-reduces leave NVLink",
        tier2, need, size, largest_local)
    end
    if tier3 > 0 then
      notes[#notes + 1] = string.format(
        "TP rule degraded: %d of %d TP groups span nodes (not enough NVLink domains with room for tp=%d GPUs), so their all-reduces run over the network",
        tier3, need, size)
    end
  end
  return U
end

---------------------------------------------------------------------------
-- Packing units into groups that should share a rack (pipelines).
-- par3d.pack(U, per, count [, notes, label]) picks `count` groups of `per`
-- consecutive units: whole groups inside one rack first (racks in walking
-- order, each rack's units in order), then, only if racks run out, groups
-- from the leftovers across racks. Returns a flat list of unit numbers:
-- group g (0-based) is order[g*per+1 .. (g+1)*per]; groups are ordered by
-- their first unit, so the first unit of the walk stays first.
---------------------------------------------------------------------------

function par3d.pack(U, per, count, notes, label)
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
  local groups, taken, largest = {}, {}, 0
  for _, r in ipairs(racks) do
    local l = byrack[r]
    if #l > largest then largest = #l end
    local k = math.min(#l // per, count - #groups)
    for g = 0, k - 1 do
      local grp = {}
      for q = 1, per do
        local u = l[g * per + q]
        grp[q] = u
        taken[u] = true
      end
      groups[#groups + 1] = grp
    end
    if #groups == count then break end
  end
  local crossing = count - #groups
  if crossing > 0 then
    local rest = {}
    for u = 1, U.n do
      if not taken[u] then rest[#rest + 1] = u end
    end
    if #rest < crossing * per then
      error(string.format("only %d units left for %d groups of %d", #rest, crossing, per), 2)
    end
    for g = 0, crossing - 1 do
      local grp = {}
      for q = 1, per do grp[q] = rest[g * per + q] end
      groups[#groups + 1] = grp
    end
    if notes then
      notes[#notes + 1] = string.format(
        "%s rule degraded: %d of %d %ss span racks (each needs %d GPUs; the largest rack offers %d usable GPUs and rack sizes do not divide evenly)",
        label or "group", crossing, count, label or "group", per * U.size, largest * U.size)
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
  local U = par3d.units(cluster, par3d.node_sequence(cluster), tp, m.world // tp, notes)
  local order = par3d.pack(U, per, dp, notes, pp > 1 and "pipeline" or "replica")
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

return par3d
