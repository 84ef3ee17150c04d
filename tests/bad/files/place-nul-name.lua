-- place() puts every rank on "dgx-h100-01\0evil": a C string would read dgx-h100-01
function place(cluster, job)
  local r = {}
  for i = 1, job.tp * job.pp * job.dp do r[i] = {rank = i - 1, node = "dgx-h100-01\0evil", gpu = (i - 1) % 8} end
  return r
end
