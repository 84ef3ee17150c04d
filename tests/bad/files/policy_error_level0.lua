-- a policy that refuses the cluster on purpose: error(msg, 0), no position
function place(cluster, job)
  error("this cluster has no rack B (fixture)", 0)
end
