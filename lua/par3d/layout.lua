-- SPDX-License-Identifier: BSD-3-Clause
-- par3d/layout.lua — the layouts the bundled policies share: the nested
-- tp/cp-ep/pp/dp layout (par3d.place_nested) and the EP-aware one
-- (par3d.place_ep).
-- lua/par3d.lua loads it through the sandbox's module loader and passes
-- the module table, the C core and the helpers the modules share.

local par3d = ...

---------------------------------------------------------------------------
-- The layout megatron.lua and devicemesh.lua share. Physically nested, from
-- the innermost: a TP group (one unit, one NVLink domain), the cp*ep units
-- of one pipeline stage (neighbours), the pp stages of one model replica
-- (consecutive, inside one rack: stage k+1 on the same or the next node),
-- and the dp replicas over the rest. The rank of each GPU follows from its
-- coordinates through the job's order string, so any order string gets the
-- same physical layout of its groups. Returns result, notes.
---------------------------------------------------------------------------

function par3d.layout_nested(cluster, job)
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
  -- every rank at once, in C (par3d.result, res:nest_units): rank with
  -- dense coordinates (t, c, p, s) gets slot t of unit
  -- order[p*per + s*inner + c + 1]
  local res = par3d.result(m.world)
  res:nest_units(m, order, U.node, U.gpu)
  local node0 = res:get(0)
  if node0 ~= 1 then
    local why
    if U.node[1] ~= 1 then
      why = string.format("that node has no NVLink domain with room for a TP group of %d", tp)
    else
      why = string.format("its rack %s cannot hold a whole %s of %d GPUs and other racks hold all of them",
        cluster.nodes[1].rack, pp > 1 and "pipeline" or "replica", per * tp)
    end
    notes[#notes + 1] = string.format("rank 0 rule degraded: rank 0 is on %s, not on the job's first node %s: %s",
      cluster.nodes[node0].name, cluster.nodes[1].name, why)
  end
  return res, notes
end

-- par3d.place_nested(cluster, job) -> result, notes: the same layout as a
-- plain list {{rank=, node=, gpu=, tp=, cp=, dp=, pp=}, ...} a policy may
-- edit (par3d.layout_nested returns it as a par3d.result, for place() to
-- return as it is)
function par3d.place_nested(cluster, job)
  local res, notes = par3d.layout_nested(cluster, job)
  local list, m = res:totable(), par3d.mesh(job)
  local st, sz = m.stride, m.size
  for i = 1, #list do
    local e = list[i]
    local r = e.rank
    e.tp, e.cp = (r // st.tp) % sz.tp, (r // st.cp) % sz.cp
    e.dp, e.pp = (r // st.dp) % sz.dp, (r // st.pp) % sz.pp
  end
  return list, notes
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
