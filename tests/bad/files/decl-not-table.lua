-- SPDX-License-Identifier: BSD-3-Clause
-- the policy returns its place function instead of a declaration table
local function place(cluster, job) return par3d.layout_nested(cluster, job) end
return place
