function place(cluster, job)
  local r = {}
  for i = 1, job.tp * job.pp * job.dp do r[i] = {rank = i - 1, node = 1, gpu = 99} end
  return r
end
