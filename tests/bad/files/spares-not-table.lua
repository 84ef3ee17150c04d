-- spares() returns a string instead of a list
function spares(cluster, job) return "dgx-h100-02" end
function place(cluster, job) return par3d.place_nested(cluster, job) end
