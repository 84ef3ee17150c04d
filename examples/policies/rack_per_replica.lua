-- SPDX-License-Identifier: BSD-3-Clause
-- rack_per_replica.lua — an example of a user policy (docs/policies.md).
--
-- Goal: give every data-parallel replica (all tp*cp*pp ranks with one dp
-- coordinate) whole nodes, filling one rack at a time, and keep each TP
-- group on one node. It ignores NVLink domain details that megatron.lua
-- handles, to stay short.
--
--   par3drun --dry-run --cluster examples/clusters/64x-dgx-h100-4racks.json \
--            --tp 8 --pp 4 --policy examples/policies/rack_per_replica.lua

local function place(cluster, job)
  local mesh = par3d.mesh(job)          -- rank arithmetic of job.order
  local notes = {}

  -- Free GPUs as (node, gpu) pairs, rack by rack, nodes in list order.
  local free = {}
  for _, node in ipairs(par3d.node_sequence(cluster)) do
    for gpu = 0, cluster.nodes[node].ngpus - 1 do
      free[#free + 1] = {node = node, gpu = gpu}
    end
  end

  local per_node = cluster.nodes[1].ngpus
  if per_node % job.tp ~= 0 then
    notes[#notes + 1] = string.format(
      "tp=%d does not divide the %d GPUs of %s: some TP groups span nodes",
      job.tp, per_node, cluster.nodes[1].name)
  end

  -- Walk the ranks replica by replica, stage by stage, tp fastest, and hand
  -- out the free GPUs in order.
  local result, next_free = {}, 1
  for dp = 0, job.dp - 1 do
    for pp = 0, job.pp - 1 do
      for cp = 0, job.cp - 1 do
        for tp = 0, job.tp - 1 do
          -- the dense coordinates; the runner fills in ep, etp, edp
          local coords = {tp = tp, cp = cp, dp = dp, pp = pp}
          local rank = mesh:rank(coords)
          local slot = free[next_free]
          next_free = next_free + 1
          coords.rank, coords.node, coords.gpu = rank, slot.node, slot.gpu
          result[rank + 1] = coords
        end
      end
    end
  end
  return result, notes
end

-- What this file declares: its placement, and whose rules decide which
-- meshes exist (Megatron-LM's order-string rules). No spares(): with
-- --spares K, par3d.default_spares chooses.
return {follows = "megatron", place = place}
