function plaec(cluster, job)
  return {}
end
