local x = require("os")
function place(cluster, job) return {} end
