-- spares() names the same node twice (--spares 2 over 3 nodes)
function spares(cluster, job) return {"dgx-h100-02", "dgx-h100-02"} end
function place(cluster, job) return par3d.place_nested(cluster, job) end
