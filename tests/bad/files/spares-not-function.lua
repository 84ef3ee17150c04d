-- the global spares is not a function
spares = {"dgx-h100-02"}
function place(cluster, job) return par3d.place_nested(cluster, job) end
