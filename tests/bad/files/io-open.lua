function place(cluster, job)
  local f = io.open("/etc/passwd")
  return {}
end
