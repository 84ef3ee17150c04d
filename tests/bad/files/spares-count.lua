-- spares() returns two nodes for --spares 1
function spares(cluster, job) return {"dgx-h100-01", "dgx-h100-02"} end
function place(cluster, job) return par3d.place_nested(cluster, job) end
