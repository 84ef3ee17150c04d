-- naive.lua — what torchrun, srun and mpirun do: rank r runs on the r-th
-- GPU of the host list (nodes in list order, GPUs in PCI order within a
-- node), whatever the racks and NVLink domains look like. Every report
-- compares its policy against this baseline.

function place(cluster, job)
  local mesh = par3d.mesh(job)
  local result, rank = {}, 0
  for i, node in ipairs(cluster.nodes) do
    for gpu = 0, node.ngpus - 1 do
      if rank >= mesh.world then return result end
      local e = mesh:coords(rank)
      e.rank, e.node, e.gpu = rank, i, gpu
      result[rank + 1] = e
      rank = rank + 1
    end
  end
  return result
end
