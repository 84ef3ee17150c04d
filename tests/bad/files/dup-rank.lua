function place(cluster, job)
  local r = {}
  for i = 1, job.tp * job.pp * job.dp do r[i] = {rank = 0, node = 1, gpu = i - 1} end
  return r
end
