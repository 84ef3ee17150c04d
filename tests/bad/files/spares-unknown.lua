-- spares() names a node the cluster does not have
function spares(cluster, job) return {"node404"} end
function place(cluster, job) return par3d.place_nested(cluster, job) end
