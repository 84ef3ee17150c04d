-- SPDX-License-Identifier: BSD-3-Clause
-- shrink_rack_last.lua — megatron's layout with a shrink hook (docs/policies.md
-- "Shrinking"): when an elastic job (--min-dp) loses a node past its last
-- spare and must drop more replicas than the broken ones, it drops those
-- of the rack that lost the node, so the rack's idle nodes and a repaired
-- node make a whole replica there again (the grow refills it first).
--
--   par3drun --dry-run --cluster tests/fixtures/clusters/plan-16x-dgx-h100-2racks.json \
--            --tp 8 --pp 2 --min-dp 4 --policy examples/policies/shrink_rack_last.lua

local function place(cluster, job)
  if job.previous then return par3d.replace(cluster, job) end
  local tp = par3d.tp_groups(cluster, job)   -- TP groups in NVLink domains
  local order = par3d.pipelines(tp, job)     -- a replica's stages in one rack
  return par3d.nest(job, tp, order)          -- Megatron's rank arithmetic
end

local function shrink(cluster, job, s)
  local hit = {}                             -- racks that lost a node or GPU
  for _, what in ipairs(s.lost) do
    local host = what:match("^[^:]+")
    for _, n in ipairs(cluster.nodes) do
      if n.name == host then hit[n.rack] = true end
    end
  end
  local keep, later = {}, {}
  for _, d in ipairs(s.intact) do            -- s.rack[d + 1]: old replica d's rack
    if hit[s.rack[d + 1]] then later[#later + 1] = d else keep[#keep + 1] = d end
  end
  for _, d in ipairs(later) do keep[#keep + 1] = d end
  local out = {}
  for i = 1, s.dp do out[i] = keep[i] end    -- exactly s.dp whole replicas
  return out
end

return {follows = "megatron", place = place, shrink = shrink}
