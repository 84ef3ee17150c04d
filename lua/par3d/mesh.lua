-- SPDX-License-Identifier: BSD-3-Clause
-- par3d/mesh.lua — the mesh arithmetic (Megatron-LM's RankGenerator): ranks,
-- coordinates and groups of a job's tp/cp/ep/dp/pp mesh, computed by the C
-- core so that Lua and C never disagree on a rank.
-- lua/par3d.lua loads it through the sandbox's module loader and passes
-- the module table, the C core and the helpers the modules share.

local par3d, core = ...

---------------------------------------------------------------------------
-- Mesh arithmetic (Megatron-LM's RankGenerator), computed by the C core:
-- the order string lists the dimensions fastest-varying first; the dense
-- grid tp*cp*dp*pp and the expert grid etp*ep*edp*pp share it (etp takes
-- tp's place, edp dp's, cp has size 1 there). rank = sum(coord[d] *
-- stride[d]) within each grid.
---------------------------------------------------------------------------

local Mesh = {}
Mesh.__index = Mesh

-- "tp-pp-dp" -> {"tp","pp","dp","cp","ep"}: dims left out are appended in
-- the default order (they must have size 1).
function par3d.parse_order(s)
  return core.parse_order(s)
end

-- par3d.mesh(job [, order]) -> mesh with fields order (list), size, stride
-- (tables keyed by dim name, etp and edp included) and world. order
-- defaults to job.order. Refuses what Megatron refuses, with its reason.
function par3d.mesh(job, order)
  if type(order) == "table" then order = table.concat(order, "-") end
  return setmetatable(core.mesh(job, order), Mesh)
end

-- mesh:rank{tp=, cp=, dp=, pp=} (missing coordinates count as 0)
function Mesh:rank(c) return core.rank(self, c) end

-- mesh:coords(rank) -> {tp=, cp=, ep=, dp=, pp=, etp=, edp=}
function Mesh:coords(r) return core.coords(self, r) end

-- mesh:group(dim, rank) -> the ranks of rank's group of dim, ascending
function Mesh:group(dim, r) return core.group(self, dim, r) end

-- mesh:groups(dim) -> every group of dim, ordered by their smallest rank
function Mesh:groups(dim) return core.groups(self, dim) end

-- par3d.is_moe(job) -> true when the job asks for expert parallelism
-- (ep > 1, or an expert tensor-parallel size etp other than tp): then the
-- ranks form the expert grid too, and EP blocks are what to keep together
function par3d.is_moe(job)
  return (job.ep or 1) > 1 or (job.etp or job.tp) ~= job.tp
end

function par3d.rank_of(mesh, coords) return mesh:rank(coords) end
function par3d.coords_of(mesh, rank) return mesh:coords(rank) end
function par3d.groups(mesh, dim) return mesh:groups(dim) end

-- par3d.result(world) -> a placement held in C that place() may return as
-- it is (docs/policies.md, "Block operations"): res:assign(first, node,
-- gpu0, n) gives ranks first..first+n-1 GPUs gpu0.. of one node,
-- res:assign_slots(first, nodes, gpus, slot0, n) a run of slots,
-- res:nest_units(mesh, order, nodes, gpus) par3d.layout_nested's whole
-- layout, res:set(rank, node, gpu) one rank; res:get(rank) -> node, gpu;
-- res:totable() -> the plain list; for MoE, res:place_ep(mesh, order,
-- nodes, gpus) par3d.place_ep's whole layout and res:tp_split(mesh,
-- cluster) -> how many TP groups span nodes or NVLink domains, of how
-- many. Each charges the budget per rank.
par3d.result = core.result

-- par3d.ep_blocks(mesh) -> S, n: EP blocks of S ranks, n of them holding
-- stage 0 (nil when blocks differ in size); par3d.unit_tiers(U, S,
-- cluster) -> units of tier 1, 2, 3 and tier-3 units inside one rack.
-- Both in C, charged per rank / per slot.
par3d.ep_blocks = core.ep_blocks
par3d.unit_tiers = core.unit_tiers

-- par3d.fill(t, first, n, v): t[first .. first+n-1] = v, in C (charged n)
par3d.fill = core.fill
