-- spares() throws
function spares(cluster, job) error("no spare for you") end
function place(cluster, job) return par3d.place_nested(cluster, job) end
