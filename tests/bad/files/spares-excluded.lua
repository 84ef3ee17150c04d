-- spares() names a node that --exclude removed
function spares(cluster, job) return {"dgx-h100-01"} end
function place(cluster, job) return par3d.place_nested(cluster, job) end
