-- spares() names "dgx-h100-02\0evil": a C string would read dgx-h100-02
function spares(cluster, job) return {"dgx-h100-02\0evil"} end
function place(cluster, job) return par3d.place_nested(cluster, job) end
