-- SPDX-License-Identifier: BSD-3-Clause
-- par3d.lua — the helper module every placement policy sees as the global
-- `par3d` (docs/policies.md lists each function). Pure Lua, no I/O: it runs
-- inside the same sandbox as the policy.
--
-- The functions live in modules by concern, lua/par3d/*.lua: this file
-- makes the table and loads them in order (each may use the ones before it
-- when called, all of them once loaded). load_module(name) is the
-- sandbox's loader (placement/policy/lua_modules.c): it compiles
-- <data dir>/lua/par3d/NAME.lua as text into the policy's environment and
-- takes no other name; a policy never sees it.
--
-- Conventions: node numbers are 1-based indices into cluster.nodes; GPU
-- numbers are 0-based PCI-order indices on their node (as in the result a
-- policy returns); ranks and mesh coordinates are 0-based.

local par3d = {}
-- The C core (placement/policy/lua_par3d.c): the mesh arithmetic of the C
-- side itself, passed in as this chunk's first argument.
local core, load_module = ...

par3d.DIMS = {"tp", "cp", "ep", "dp", "pp"}
-- every dimension a rank has a coordinate in: the dense grid's tp, cp, dp,
-- pp and the expert grid's etp, ep, edp (docs/policies.md)
par3d.ALL_DIMS = {"tp", "cp", "ep", "dp", "pp", "etp", "edp"}

-- helpers the modules share that are not part of the policy API
local shared = {}
for _, name in ipairs({"mesh", "hardware", "units", "racks", "layout", "replace"}) do
  load_module(name)(par3d, core, shared)
end

return par3d
