-- spares() never returns: the instruction cap stops it
function spares(cluster, job) local n = 0 while true do n = n + 1 end end
function place(cluster, job) return par3d.place_nested(cluster, job) end
