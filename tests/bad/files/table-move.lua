function place(cluster, job)
  table.move({1}, 1, math.maxinteger, 0)
end
