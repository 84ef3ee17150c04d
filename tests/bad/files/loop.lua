function place(cluster, job)
  while true do end
end
