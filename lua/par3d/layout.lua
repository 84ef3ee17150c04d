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
  local W, sz = m.world, m.size
  local pp = sz.pp
  -- the blocks (every rank with its predecessor in its tp, etp and ep
  -- groups, closed), in C: S ranks each, nbundles of them hold stage 0
  local S, nbundles = par3d.ep_blocks(m)
  if not S then return par3d.place_nested(cluster, job) end
  local notes = {}
  local U = par3d.units(cluster, par3d.node_sequence(cluster), S, W // S)
  local order = par3d.pack(U, pp, nbundles, notes, pp > 1 and "EP pipeline block" or "EP block")
  -- every rank at once, in C: the b-th stage-0 block moved to stage s
  -- onto unit order[b*pp + s + 1], each TP group on consecutive slots
  local res = par3d.result(W)
  res:place_ep(m, order, U.node, U.gpu)
  -- TP groups are laid on consecutive slots of their block; inside a block
  -- that leaves NVLink some of them may straddle two domains: say so
  local split, ntpg = res:tp_split(m, cluster)
  if split > 0 then
    notes[#notes + 1] = string.format(
      "TP rule degraded: %d of %d TP groups span NVLink domains: they sit inside EP blocks of %d GPUs that do not fit one domain",
      split, ntpg, S)
  end
  local node0 = res:get(0)
  if node0 ~= 1 then
    notes[#notes + 1] = string.format("rank 0 rule degraded: rank 0 is on %s, not on the job's first node %s: EP blocks of %d GPUs are placed where they fit best",
      cluster.nodes[node0].name, cluster.nodes[1].name, S)
  end
  -- what each block got: 1 NVLink domain, 2 one node, 3 several nodes
  local c1, c2, c3, in_rack = par3d.unit_tiers(U, S, cluster)
  local count = {c1, c2, c3}
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
