-- SPDX-License-Identifier: BSD-3-Clause
-- naive.lua — what torchrun, srun and mpirun do: rank r runs on the r-th
-- GPU of the host list (nodes in list order, GPUs in PCI order within a
-- node), whatever the racks and NVLink domains look like. Every report
-- compares its policy against this baseline.

local function place(cluster, job)
  -- a lost node: keep every healthy rank, move its ranks to a spare
  if job.previous then return par3d.replace(cluster, job) end
  local world = par3d.mesh(job).world
  local result, rank = {}, 0
  -- {rank, node, gpu} only: coordinates are optional in a result (par3drun
  -- derives them from the rank), and at 100k+ ranks three fields instead
  -- of eight make each entry a smaller table
  for i, node in ipairs(cluster.nodes) do
    for gpu = 0, node.ngpus - 1 do
      if rank >= world then return result end
      result[rank + 1] = {rank = rank, node = i, gpu = gpu}
      rank = rank + 1
    end
  end
  return result
end

return {
  follows = "megatron", -- Megatron-LM's rules for which meshes exist
  place = place,
  -- spares (--spares K): the default rule, one per rack (or per multi-node
  -- NVLink domain of a rack) from the end of each (par3d.default_spares)
  spares = par3d.default_spares,
}
