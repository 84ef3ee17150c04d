-- SPDX-License-Identifier: BSD-3-Clause
-- par3d/hardware.lua — the cluster's hardware as groups: racks, multi-node
-- NVLink domains, each node's NVLink domains, and the order placement walks
-- the nodes in; and the stable sort the rest relies on.
-- lua/par3d.lua loads it through the sandbox's module loader and passes
-- the module table, the C core and the helpers the modules share.

local par3d, _, shared = ...

---------------------------------------------------------------------------
-- Sorting
---------------------------------------------------------------------------

-- Sorts list in place by key(x) (numbers or strings), keeping the original
-- order among equal keys (table.sort alone is not stable). Returns list.
function par3d.stable_sort(list, key)
  local n, idx, keys = #list, {}, {}
  for i = 1, n do
    idx[i] = i
    keys[i] = key(list[i])
  end
  table.sort(idx, function(a, b)
    local ka, kb = keys[a], keys[b]
    if ka ~= kb then return ka < kb end
    return a < b
  end)
  local copy = {}
  for i = 1, n do copy[i] = list[idx[i]] end
  for i = 1, n do list[i] = copy[i] end
  return list
end

---------------------------------------------------------------------------
-- Grouping the hardware
---------------------------------------------------------------------------

-- The nodes grouped by key(nd) (nil: left out), groups in the order their
-- first node appears: {{name=, index=, nodes={node numbers in list order}}, ...};
-- name(nd) and index(nd) describe a group by its first node.
local function group_nodes(cluster, key, name, index)
  local out, at = {}, {}
  for i, nd in ipairs(cluster.nodes) do
    local k = key(nd)
    if k ~= nil then
      local e = at[k]
      if not e then
        e = {name = name(nd), index = index(nd), nodes = {}}
        at[k] = e
        out[#out + 1] = e
      end
      e.nodes[#e.nodes + 1] = i
    end
  end
  return out
end
shared.group_nodes = group_nodes

-- Racks in the order their first node appears in the node list:
-- {{name=, index=, nodes={node numbers in list order}}, ...}
function par3d.racks(cluster)
  local function ri(nd) return nd.rack_index end
  return group_nodes(cluster, ri, function(nd) return nd.rack end, ri)
end

-- Multi-node NVLink domains (GB200 NVL72, Slurm topology/block) in order of
-- first appearance: {{name=, index=, nodes={...}}, ...}. Nodes outside any
-- such domain are left out.
function par3d.nvlink_domains(cluster)
  local function di(nd) return nd.nvlink_domain_index end
  return group_nodes(cluster, di, function(nd) return nd.nvlink_domain end, di)
end

-- Every NVLink domain inside a node, nodes in list order (or in the order
-- of the node numbers given): {{node=, domain= (0-based), gpus={...}}, ...}
function par3d.gpu_domains(cluster, nodes)
  local out = {}
  local list = nodes or {}
  if not nodes then
    for i = 1, #cluster.nodes do list[i] = i end
  end
  for _, i in ipairs(list) do
    for d, gpus in ipairs(cluster.nodes[i].domains) do
      local g = {}
      for k, x in ipairs(gpus) do g[k] = x end
      out[#out + 1] = {node = i, domain = d - 1, gpus = g}
    end
  end
  return out
end

-- The order in which placement walks the nodes: racks in order of first
-- appearance (so the job's first node comes first), each rack's nodes in
-- list order, except that the nodes of one multi-node NVLink domain stay
-- together at the place of the first of them. Slurm lists nodes
-- alphabetically, which may interleave racks; this undoes that.
function par3d.node_sequence(cluster)
  local nodes, seq = cluster.nodes, {}
  for _, rk in ipairs(par3d.racks(cluster)) do
    local members, done = {}, {}
    for _, i in ipairs(rk.nodes) do
      local d = nodes[i].nvlink_domain_index
      if d then
        local m = members[d]
        if not m then
          m = {}
          members[d] = m
        end
        m[#m + 1] = i
      end
    end
    for _, i in ipairs(rk.nodes) do
      local d = nodes[i].nvlink_domain_index
      if not d then
        seq[#seq + 1] = i
      elseif not done[d] then
        done[d] = true
        for _, j in ipairs(members[d]) do seq[#seq + 1] = j end
      end
    end
  end
  return seq
end
