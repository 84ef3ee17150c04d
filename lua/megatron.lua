-- SPDX-License-Identifier: BSD-3-Clause
-- megatron.lua — placement for Megatron-LM (and NeMo, Megatron-DeepSpeed).
-- docs/policies.md walks through this file; every par3d.* call it makes is
-- listed there with its inputs, outputs and errors.
--
-- Megatron forms its process groups from rank numbers alone: the order
-- string (job.order, default "tp-cp-ep-dp-pp"; --order to change, e.g.
-- "tp-cp-ep-pp-dp" for --use-tp-pp-dp-mapping) lists the dimensions
-- fastest-varying first, rank = sum(coord * stride). This policy never
-- changes that arithmetic; it chooses which GPU each rank runs on so that:
--   1. every TP group sits inside one NVLink domain: several TP groups per
--      node when tp < GPUs per node, across nodes only inside a multi-node
--      NVLink domain (GB200 NVL72, Slurm topology/block);
--   2. every pipeline's stages sit on nodes of one rack, consecutive stages
--      on the same or adjacent nodes (the rack's nodes in list order);
--   3. DP spans the rest;
--   4. rank 0 lands on the job's first node.
-- When the hardware cannot satisfy a rule, the layout degrades to the next
-- best (a TP group across a node's domains, then across nodes; a pipeline
-- across racks) and a note names the rule and why.

-- The note on pipelines that span racks, in this policy's words. A block
-- here holds all tp lanes of one model replica's stages (tp x pp ranks, or
-- tp x cp x pp), while the PP_CROSSES_RACKS check counts pipelines (PP
-- groups): say which, so "1 of 9" here and "8 of 72" there do not read as
-- a contradiction.
local function pipeline_note(crossed, job)
  if crossed.what ~= "pipeline" then return crossed.text end
  local ranks = (job.cp or 1) > 1 and "tp x cp x pp" or "tp x pp"
  return string.format("pipeline rule degraded: %d of %d pipeline blocks (%s ranks each) span racks " ..
    "(each needs %d GPUs; %s)", crossed.count, crossed.of, ranks, crossed.gpus, crossed.because)
end

local function place(cluster, job)
  -- a lost node: every healthy rank stays, the lost node's ranks move
  -- together to one spare, as near as there is one
  if job.previous then return par3d.replace(cluster, job) end
  -- MoE: each EP block (the TP groups and expert tp-ep groups that share
  -- ranks) inside one NVLink domain, else one node, else one rack
  if par3d.is_moe(job) and par3d.ep_blocks(par3d.mesh(job)) then
    return par3d.place_ep(cluster, job)
  end
  local notes = {}
  -- 1. TP groups: units of tp GPUs, inside one NVLink domain where the
  --    hardware has room, else one node, else one rack
  local tp = par3d.tp_groups(cluster, job)
  for _, d in ipairs(tp.degraded) do notes[#notes + 1] = d.text end
  -- 2. pipelines: cp x pp units per model replica, whole inside one rack
  local order, crossed = par3d.pipelines(tp, job)
  if crossed then notes[#notes + 1] = pipeline_note(crossed, job) end
  -- 3. every rank onto its GPU, by Megatron's own rank arithmetic
  local result = par3d.nest(job, tp, order)
  -- 4. rank 0 on the first node, or a note why not
  local moved = par3d.rank0_rule(result, cluster, job, tp)
  if moved then notes[#notes + 1] = moved.text end
  return result, notes
end

-- Spares (--spares K): the default spread (one per rack, or per multi-node
-- NVLink domain of a rack, in turns: par3d.default_spares) unless a block
-- of ranks that must stay together needs B > 1 whole nodes. Then a unit
-- whose last node could not hold a whole block anyway gives first. The
-- block is a TP group when it spans trays of a multi-node NVLink domain
-- (tp > GPUs per node: its all-reduces must stay on that fabric), else a
-- pipeline block (tp x cp x pp ranks, kept in one rack).
local function spares(cluster, job)
  local per = par3d.gpus_per_node(cluster) -- nil on mixed nodes
  local tp = job.tp or 1
  local block = tp * (job.cp or 1) * (job.pp or 1)
  local tp_block = per ~= nil and #par3d.nvlink_domains(cluster) > 0 and tp > per and tp % per == 0
  if tp_block then block = tp end
  if par3d.is_moe(job) or not per or block <= per or block % per ~= 0 then
    return par3d.default_spares(cluster, job)
  end
  local B = block // per -- whole nodes one block needs
  local taken, err = par3d.take_spares(cluster, job.spares, function(unit)
    local last = unit.left < 2 and 1 or 0          -- down to its last node
    local costs = unit.left % B == 0 and 1 or 0    -- giving breaks a whole block
    -- a TP group split over two NVLink domains is an error
    -- (TP_CROSSES_NODES), a far spare only a slower heal: whole blocks
    -- first, then the spread; pipeline blocks: the spread first
    if tp_block then return {costs, last, unit.given} end
    return {last, unit.given, costs}
  end)
  if not taken then error(err.text, 0) end
  return taken
end

return {
  follows = "megatron", -- Megatron-LM's rules for which meshes exist
  place = place,
  spares = spares,
}
