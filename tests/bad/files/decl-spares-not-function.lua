-- SPDX-License-Identifier: BSD-3-Clause
-- the declaration's spares is a list, not a function
local function place(cluster, job) return par3d.layout_nested(cluster, job) end
return {place = place, spares = {"dgx-h100-02"}}
