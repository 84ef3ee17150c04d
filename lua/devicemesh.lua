-- devicemesh.lua — placement for PyTorch DeviceMesh / torchtitan.
--
-- init_device_mesh("cuda", (pp, dp, tp), mesh_dim_names=("pp", "dp", "tp"))
-- lays ranks out row-major: the LAST mesh dimension varies fastest, i.e.
-- rank = tp + TP*(dp + DP*pp). That is the order string "tp-dp-pp" read
-- fastest-first, which is what par3drun's default "tp-cp-ep-dp-pp" reduces
-- to when cp = ep = 1. In general, the DeviceMesh equivalent of an order
-- string is its dimensions reversed: "tp-cp-dp-pp" <-> (pp, dp, cp, tp).
-- Physically the goals are megatron.lua's: TP inside an NVLink domain,
-- pipelines inside a rack, DP over the rest (par3d.place_nested). The notes
-- name the init_device_mesh call that reproduces the same groups.

local function device_mesh_call(job)
  local dims = par3d.parse_order(job.order)
  local names, sizes = {}, {}
  for i = #dims, 1, -1 do
    local d = dims[i]
    if job[d] > 1 then
      names[#names + 1] = string.format("%q", d)
      sizes[#sizes + 1] = tostring(job[d])
    end
  end
  if #names == 0 then
    return 'init_device_mesh("cuda", (1,), mesh_dim_names=("dp",))'
  end
  local comma = #names == 1 and "," or ""
  return string.format('init_device_mesh("cuda", (%s%s), mesh_dim_names=(%s%s))',
    table.concat(sizes, ", "), comma, table.concat(names, ", "), comma)
end

function place(cluster, job)
  -- a lost node: keep every healthy rank, move its ranks to a spare
  if job.previous then return par3d.replace(cluster, job) end
  local result, notes = par3d.place_nested(cluster, job)
  table.insert(notes, 1, "DeviceMesh: " .. device_mesh_call(job) ..
    " forms the same groups as order " .. job.order)
  return result, notes
end
