-- spares() allocates without bound: the memory cap stops it
function spares(cluster, job) local t = {} for i = 1, 1e12 do t[i] = string.rep("x", 64) .. i end end
function place(cluster, job) return par3d.place_nested(cluster, job) end
