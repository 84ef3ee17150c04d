local f = load(string.dump(function() return 1 end))
function place(cluster, job) return f() end
