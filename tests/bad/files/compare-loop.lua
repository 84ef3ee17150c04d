function place(cluster, job)
  local s = ("x"):rep(10 * 2^20)
  while true do local _ = s < s end
end
