function place(cluster, job)
  local s = string.rep("a", 3000)
  s:find(".-.-.-.-b")
  return {}
end
