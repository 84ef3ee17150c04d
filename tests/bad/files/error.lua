function place(cluster, job)
  error("deliberate failure in the policy")
end
