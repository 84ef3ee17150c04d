function place(cluster, job)
  return 42
end
