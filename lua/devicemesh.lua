-- SPDX-License-Identifier: BSD-3-Clause
-- devicemesh.lua — placement for PyTorch DeviceMesh / torchtitan.
--
-- init_device_mesh("cuda", (pp, dp, tp), mesh_dim_names=("pp", "dp", "tp"))
-- lays ranks out row-major: the LAST mesh dimension varies fastest, i.e.
-- rank = tp + TP*(dp + DP*pp). That is the order string "tp-dp-pp" read
-- fastest-first, which is what par3drun's default "tp-cp-ep-dp-pp" reduces
-- to when cp = ep = 1. In general, the DeviceMesh equivalent of an order
-- string is its dimensions reversed: "tp-cp-dp-pp" <-> (pp, dp, cp, tp).
--
-- Expert parallelism (ep > 1 or etp ~= tp) is carved out of the data-
-- parallel ranks, as Megatron does: the ranks form two grids over the same
-- world, the dense one (tp, cp, dp, pp; ep is not a dimension of it) and
-- the expert one (etp, ep, edp, pp: the order string with etp in tp's
-- place, edp in dp's and no cp). Each is its own init_device_mesh over the
-- same ranks, e.g. dense (pp, dp, tp) and expert (pp, edp, ep, etp); the
-- notes name both calls.
-- Physically the goals are megatron.lua's: TP inside an NVLink domain,
-- pipelines inside a rack, DP over the rest (par3d.layout_nested: the
-- four steps of megatron.lua's place() in one call, every note in the
-- helpers' words), and for MoE every EP block (etp*ep ranks with their
-- TP groups) inside one NVLink domain when it fits (par3d.place_ep).

-- init_device_mesh call for the dims (fastest first) with sizes size[d];
-- dims of size 1 are left out.
local function mesh_call(dims, size)
  local names, sizes = {}, {}
  for i = #dims, 1, -1 do
    local d = dims[i]
    if size[d] > 1 then
      names[#names + 1] = string.format("%q", d)
      sizes[#sizes + 1] = tostring(size[d])
    end
  end
  if #names == 0 then
    return 'init_device_mesh("cuda", (1,), mesh_dim_names=("dp",))'
  end
  local comma = #names == 1 and "," or ""
  return string.format('init_device_mesh("cuda", (%s%s), mesh_dim_names=(%s%s))',
    table.concat(sizes, ", "), comma, table.concat(names, ", "), comma)
end

local function device_mesh_note(job, moe)
  local dims = par3d.parse_order(job.order)
  local dense, expert = {}, {}
  local rename = {tp = "etp", dp = "edp"}
  for _, d in ipairs(dims) do
    if d ~= "ep" then dense[#dense + 1] = d end
    if d ~= "cp" then expert[#expert + 1] = rename[d] or d end
  end
  if not moe then
    return "DeviceMesh: " .. mesh_call(dense, job) .. " forms the same groups as order " .. job.order
  end
  return "DeviceMesh: dense (attention) grid " .. mesh_call(dense, job) ..
    " and expert (MoE) grid " .. mesh_call(expert, job) ..
    ", both over the same ranks, form the same groups as order " .. job.order ..
    " (ep is carved out of dp: dp = ep*edp*etp/tp/cp)"
end

local function place(cluster, job)
  -- a lost node: keep every healthy rank, move its ranks to a spare
  if job.previous then return par3d.replace(cluster, job) end
  local moe = par3d.is_moe(job)
  local result, notes = (moe and par3d.place_ep or par3d.layout_nested)(cluster, job)
  -- first note: the init_device_mesh call(s) that form the same groups
  table.insert(notes, 1, device_mesh_note(job, moe))
  return result, notes
end

return {
  -- judged by DeviceMesh's shape rules, not Megatron's (include/p3d/job.h,
  -- P3D_RULES_DEVICEMESH): any mesh init_device_mesh accepts is placed;
  -- the expert grid exists only when EP is asked for (ep > 1 or etp ~= tp)
  follows = "devicemesh",
  place = place,
  -- spares (--spares K): the default rule, one per rack (or per multi-node
  -- NVLink domain of a rack) from the end of each (par3d.default_spares)
  spares = par3d.default_spares,
}
