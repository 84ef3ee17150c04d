function place(cluster, job)
  local t = {}
  for i = 1, 1e12 do t[i] = string.rep("x", 64) .. i end
end
