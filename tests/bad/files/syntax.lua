function place(cluster, job)
  return {
end
