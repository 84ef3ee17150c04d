-- SPDX-License-Identifier: BSD-3-Clause
-- par3d/layout.lua — the layouts the bundled policies share: the nested
-- tp/cp/pp/dp layout in four steps (par3d.tp_groups, par3d.pipelines,
-- par3d.nest, par3d.rank0_rule; par3d.layout_nested, par3d.place_nested)
-- and the EP-aware one (par3d.place_ep).
-- lua/par3d.lua loads it through the sandbox's module loader and passes
-- the module table, the C core and the helpers the modules share.

local par3d = ...

---------------------------------------------------------------------------
-- The layout megatron.lua and devicemesh.lua share, in four steps a policy
-- calls in plain sight (megatron.lua's place()). Physically nested, from
-- the innermost: a TP group (one unit, one NVLink domain), the cp units of
-- one pipeline stage (neighbours), the pp stages of one model replica
-- (consecutive, inside one rack: stage k+1 on the same or the next node),
-- and the dp replicas over the rest. The rank of each GPU follows from its
-- coordinates through the job's order string, so any order string gets the
-- same physical layout of its groups.
-- What a step could not have comes back as records, never only as text:
-- {rule =, kind =, count =, of =, ..., text = the note in English}, so a
-- policy words a note its own way by kind, without matching the English.
---------------------------------------------------------------------------

-- Step 1. par3d.tp_groups(cluster, job) -> U: the job's TP groups as units
-- of tp GPUs (par3d.units): as many as the TP rule allows inside one
-- NVLink domain, then inside one node, then inside one rack, each rack
-- giving as many as keep its pipelines (cp*pp units each) whole
-- (par3d.unit_bounds, par3d.rack_counts). U.degraded: records of kind
-- tp_on_multinode_nvlink, tp_spans_cliques_ring, tp_spans_domains,
-- tp_spans_nodes, tp_spans_racks (par3d.units). U.blocks: {per =, fit =,
-- fit_any =, cross =} for step 2's reasons.
function par3d.tp_groups(cluster, job)
  local m = par3d.mesh(job)
  local tp, per, dp = m.size.tp, m.size.cp * m.size.pp, m.size.dp
  local seq, need = par3d.node_sequence(cluster), m.world // tp
  local C = par3d.capacity(cluster, seq, tp)
  local lo, hi, cross = par3d.unit_bounds(C, need)
  -- how many units each rack gives: for the pipelines (objectives 4, 5)
  -- within what the TP rule allows (1-3); units forced across racks leave
  -- no choice
  local counts = cross > 0 and hi or par3d.rack_counts(lo, hi, per, dp)
  -- whole pipelines the racks could hold: by GPU count, and with every TP
  -- group placed as the TP rule asks first
  local fit, fit_any = 0, 0
  for k, rk in ipairs(C.racks) do
    fit, fit_any = fit + hi[k] // per, fit_any + rk.cap // per
  end
  local U = par3d.units(cluster, seq, tp, need, nil, counts, C)
  U.blocks = {per = per, fit = fit, fit_any = fit_any, cross = cross}
  return U
end

-- Step 2. par3d.pipelines(U, job) -> order, crossed: the units of step 1
-- packed into dp blocks of cp*pp units (a model replica's pipeline
-- stages), whole blocks inside one rack, the rest from the racks'
-- fragments touching the fewest racks (par3d.pack_blocks). crossed is nil
-- when every block is inside one rack, else the record {rule = what, kind
-- = "blocks_span_racks", what = "pipeline" (pp > 1) or "replica", count =,
-- of = dp, gpus = GPUs of a block, cause =, because =, text =}; cause is
-- tp_spans_racks (some TP groups span racks), racks_too_small (no room by
-- GPU count), tp_rule_first (room, but not once the TP rule has placed
-- its groups) or tp_rule_counts (the TP rule fixes how many units some
-- racks hold); because says it in English.
function par3d.pipelines(U, job)
  local m = par3d.mesh(job)
  local pp, dp, b = m.size.pp, m.size.dp, U.blocks
  local order, crossed = par3d.pack_blocks(U, b.per, dp)
  if not crossed then return order end
  local what, gpus = pp > 1 and "pipeline" or "replica", b.per * U.size
  local cause, because
  if b.cross > 0 then
    cause, because = "tp_spans_racks", "some TP groups themselves span racks"
  elseif b.fit_any < dp then
    cause, because = "racks_too_small",
      string.format("the racks hold only %d whole %ss of %d GPUs", b.fit_any, what, gpus)
  elseif b.fit < dp then
    cause, because = "tp_rule_first",
      string.format("the racks could hold %d whole %ss of %d GPUs, but only %d with every TP group placed as the TP rule asks first",
        b.fit_any, what, gpus, b.fit)
  else
    cause, because = "tp_rule_counts",
      string.format("placing every TP group as the TP rule asks first fixes how many some racks must hold, and those do not make whole %ss",
        what)
  end
  local d = {rule = what, kind = "blocks_span_racks", what = what, count = crossed.count, of = dp, gpus = gpus,
    cause = cause, because = because}
  d.text = string.format("%s rule degraded: %d of %d %ss span racks (each needs %d GPUs; %s)",
    what, d.count, dp, what, gpus, because)
  return order, d
end

-- Step 3. par3d.nest(job, U, order) -> result: every rank at once, in C
-- (res:nest_units): the rank with dense coordinates (t, c, p, s) gets GPU
-- t of unit order[p*cp*pp + s*cp + c + 1]
function par3d.nest(job, U, order)
  local m = par3d.mesh(job)
  local res = par3d.result(m.world)
  res:nest_units(m, order, U.node, U.gpu)
  return res
end

-- Step 4. par3d.rank0_rule(result, cluster, job, U) -> nil when rank 0 is
-- on the job's first node, else the record {rule = "rank 0", kind =
-- "rank0_moved", node = name of rank 0's node, first = the first node's
-- name, cause = no_nvlink_room (that node has no NVLink domain with room
-- for a TP group) or rack_too_small (its rack cannot hold a whole
-- pipeline), because =, text =}
function par3d.rank0_rule(result, cluster, job, U)
  local node0 = result:get(0)
  if node0 == 1 then return nil end
  local m = par3d.mesh(job)
  local tp, pp = m.size.tp, m.size.pp
  local cause, because
  if U.node[1] ~= 1 then
    cause, because = "no_nvlink_room",
      string.format("that node has no NVLink domain with room for a TP group of %d", tp)
  else
    cause, because = "rack_too_small",
      string.format("its rack %s cannot hold a whole %s of %d GPUs and other racks hold all of them",
        cluster.nodes[1].rack, pp > 1 and "pipeline" or "replica", U.blocks.per * tp)
  end
  local d = {rule = "rank 0", kind = "rank0_moved", node = cluster.nodes[node0].name, first = cluster.nodes[1].name,
    cause = cause, because = because}
  d.text = string.format("rank 0 rule degraded: rank 0 is on %s, not on the job's first node %s: %s",
    d.node, d.first, because)
  return d
end

-- par3d.layout_nested(cluster, job) -> result, notes: the four steps in
-- one call, every record's text as a note (devicemesh.lua's layout)
function par3d.layout_nested(cluster, job)
  local notes = {}
  local U = par3d.tp_groups(cluster, job)
  for _, d in ipairs(U.degraded) do notes[#notes + 1] = d.text end
  local order, crossed = par3d.pipelines(U, job)
  if crossed then notes[#notes + 1] = crossed.text end
  local result = par3d.nest(job, U, order)
  local moved = par3d.rank0_rule(result, cluster, job, U)
  if moved then notes[#notes + 1] = moved.text end
  return result, notes
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
