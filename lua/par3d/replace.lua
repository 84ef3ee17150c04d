-- SPDX-License-Identifier: BSD-3-Clause
-- par3d/replace.lua — after a failure and before the start: moving a lost
-- node's ranks onto a spare (par3d.replace) and choosing the hot spares
-- (par3d.spare_units, par3d.default_spares).
-- lua/par3d.lua loads it through the sandbox's module loader and passes
-- the module table, the C core and the helpers the modules share.

local par3d, _, shared = ...

---------------------------------------------------------------------------
-- Replacing a lost node (job.previous is set; docs/policies.md). Every rank
-- whose node is still in the cluster keeps its node and GPU; the ranks of
-- each failed node move, together, to one spare (cluster.nodes[i].spare):
-- the best is in the failed node's multi-node NVLink domain, else in its
-- rack, else the nearest rack (rack_distance), else any; ties go to list
-- order. GPU for GPU: a rank keeps its GPU index when the spare has the
-- same NVLink-domain structure (the same topology), else takes the spare's
-- GPUs domain by domain in PCI order. Every bundled policy calls this.
---------------------------------------------------------------------------

-- The GPU map old index -> spare index for a failed node's GPUs `gpus`.
local function gpu_map(spare, gpus, failed_domains)
  local map, same = {}, failed_domains ~= nil and #spare.domains == #failed_domains
  if same then
    for d, list in ipairs(spare.domains) do
      if #list ~= #failed_domains[d] then same = false end
    end
  end
  if same or not failed_domains then
    local ok = true
    for _, g in ipairs(gpus) do
      if g >= spare.ngpus then ok = false end
    end
    if ok then
      for _, g in ipairs(gpus) do map[g] = g end
      return map
    end
  end
  local free = {}
  for _, list in ipairs(spare.domains) do
    for _, x in ipairs(list) do free[#free + 1] = x end
  end
  table.sort(gpus)
  for k, g in ipairs(gpus) do
    if not free[k] then return nil end
    map[g] = free[k]
  end
  return map
end

function par3d.replace(cluster, job)
  local prev = job.previous
  local byname, notes = {}, {}
  -- only nodes that run ranks keep them: a spare's name is not looked up
  for i, nd in ipairs(cluster.nodes) do
    if not nd.spare then byname[nd.name] = i end
  end
  -- every rank whose node is still there keeps its node and GPU, in C;
  -- lost[name] = {ranks=, gpus=} for the rest, order: their nodes
  local result = par3d.result(job.world)
  local lost, order = result:keep_previous(prev.ranks, byname)
  local info = {}
  for _, f in ipairs(prev.failed or {}) do info[f.name] = f end
  local rack_index = {}
  for _, rk in ipairs(par3d.racks(cluster)) do rack_index[rk.name] = rk.index end
  local taken = {}
  for _, name in ipairs(order) do
    local e, f = lost[name], info[name] or {}
    local best, best_key
    for i, nd in ipairs(cluster.nodes) do
      if nd.spare and not taken[i] and nd.ngpus >= #e.ranks then
        local key
        if f.nvlink_domain and nd.nvlink_domain == f.nvlink_domain then
          key = 0
        elseif f.rack and nd.rack == f.rack then
          key = 1
        else
          local d = 1000
          local a, b = rack_index[f.rack], rack_index[nd.rack]
          if a and b and cluster.rack_distance and cluster.rack_distance[a] then
            local x = cluster.rack_distance[a][b]
            if x and x >= 0 then d = x end
          end
          key = 2 + d
        end
        if not best_key or key < best_key then best, best_key = i, key end
      end
    end
    if not best then
      error(string.format("no spare node left for the %d ranks of lost node %s (every --spares node is in use " ..
        "or lost)", #e.ranks, name), 0)
    end
    taken[best] = true
    local spare = cluster.nodes[best]
    local map = gpu_map(spare, e.gpus, nil)
    if not map then
      error(string.format("spare node %s has %d GPUs, lost node %s ran %d ranks", spare.name, spare.ngpus,
        name, #e.ranks), 0)
    end
    for k, r in ipairs(e.ranks) do
      result:set(r, best, map[e.gpus[k]])
    end
    local where = best_key == 0 and "same NVLink domain " .. f.nvlink_domain
      or best_key == 1 and "same rack " .. f.rack or "another rack: " .. spare.rack
    notes[#notes + 1] = string.format("replacement: the %d ranks of lost node %s moved to spare %s (%s); " ..
      "every other rank stayed where it was", #e.ranks, name, spare.name, where)
  end
  return result, notes
end

---------------------------------------------------------------------------
-- Choosing the hot spares (--spares K; docs/policies.md "Choosing the
-- spares"). par3drun calls the policy's spares(cluster, job) when it has
-- one, else this rule. cluster.nodes are the usable nodes (no --exclude'd
-- node); the result is a list of job.spares node names.
-- The rule: the spare units (racks; in a cluster with multi-node NVLink
-- domains, each rack's NVLink domains: par3d.spare_units), in the order
-- of their first node, take turns giving their last node not yet chosen,
-- while the unit keeps at least one node that runs ranks; when every unit
-- is down to one node, units keep taking turns giving their last node (a
-- unit may then run no rank at all). A spare thus sits in every rack (and
-- NVLink domain) that has room, so that a lost node's ranks can stay in
-- their rack, or on the NVLink fabric their tensor-parallel peers use.
---------------------------------------------------------------------------

-- Where spares are spread: {{name=, nodes={i, ...}}, ...} in the order of
-- first appearance. Racks; a node in a multi-node NVLink domain counts in
-- its (rack, domain) pair instead, so that two NVL36 domains of one rack
-- are two units. Nodes outside any domain stay with their rack.
function par3d.spare_units(cluster)
  return shared.group_nodes(cluster,
    function(nd) return tostring(nd.rack_index) .. "/" .. tostring(nd.nvlink_domain_index or "") end,
    function(nd) return nd.nvlink_domain and (nd.rack .. "/" .. nd.nvlink_domain) or nd.rack end,
    function(nd) return nd.rack_index end)
end

-- par3d.gpus_per_node(cluster) -> n when every node has the same number n
-- >= 1 of GPUs, else nil (mixed nodes, or none with GPUs)
function par3d.gpus_per_node(cluster)
  local per
  for _, nd in ipairs(cluster.nodes) do
    if per and nd.ngpus ~= per then return nil end
    per = nd.ngpus
  end
  return per and per >= 1 and per or nil
end

-- a < b for two lists of numbers of one length, compared entry by entry
local function lexically_less(a, b)
  for i = 1, #a do
    if a[i] ~= b[i] then return a[i] < b[i] end
  end
  return false
end

-- par3d.take_spares(cluster, k, key) -> k node names, or nil, err. The
-- spare units (par3d.spare_units) give nodes one at a time, each unit its
-- last node not yet chosen; each time the unit whose key is smallest gives.
-- key(unit) sees {name=, nodes=, left= (its nodes not chosen yet), given=
-- (chosen from it so far)} and returns a list of numbers, compared entry
-- by entry; ties go to the unit that comes first. err when the units run
-- out of nodes: {kind = "too_few_nodes", asked = k, usable = #nodes, text =
-- the message in English}.
function par3d.take_spares(cluster, k, key)
  local units, out, left, given = par3d.spare_units(cluster), {}, {}, {}
  for r, u in ipairs(units) do left[r], given[r] = #u.nodes, 0 end
  while #out < k do
    local best, bkey
    for r, u in ipairs(units) do
      if left[r] >= 1 then
        local kr = key({name = u.name, nodes = u.nodes, left = left[r], given = given[r]})
        kr[#kr + 1] = r
        if not bkey or lexically_less(kr, bkey) then best, bkey = r, kr end
      end
    end
    if not best then
      return nil, {kind = "too_few_nodes", asked = k, usable = #cluster.nodes,
        text = string.format("--spares %d: only %d usable nodes", k, #cluster.nodes)}
    end
    out[#out + 1] = cluster.nodes[units[best].nodes[left[best]]].name
    left[best], given[best] = left[best] - 1, given[best] + 1
  end
  return out
end

function par3d.default_spares(cluster, job)
  local k = job.spares or 0
  local racks, out = par3d.spare_units(cluster), {}
  if k >= #cluster.nodes then
    error(string.format("--spares %d: only %d usable nodes, at least one must run ranks", k, #cluster.nodes), 0)
  end
  local left = {}
  for r, rk in ipairs(racks) do left[r] = #rk.nodes end
  for pass = 1, 2 do
    local gave = true
    while #out < k and gave do
      gave = false
      for r, rk in ipairs(racks) do
        if #out < k and left[r] > 0 and (pass == 2 or left[r] >= 2) then
          local i = rk.nodes[left[r]]
          left[r] = left[r] - 1
          out[#out + 1] = cluster.nodes[i].name
          gave = true
        end
      end
    end
  end
  return out
end
