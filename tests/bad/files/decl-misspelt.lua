-- SPDX-License-Identifier: BSD-3-Clause
-- the declaration misspells place: refused by name, not run without a hook
local function place(cluster, job) return par3d.layout_nested(cluster, job) end
return {follows = "megatron", plcae = place}
