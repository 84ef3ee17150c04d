function place(cluster, job)
  os.execute("touch /tmp/p3d-pwned")
  return {}
end
