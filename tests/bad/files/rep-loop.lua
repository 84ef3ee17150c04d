function place(cluster, job)
  while true do local s = ("x"):rep(1 << 24) end
end
