function place(cluster, job)
  local f = pairs(cluster)
  f(setmetatable({}, {__index = 1}))
end
