-- SPDX-License-Identifier: BSD-3-Clause
-- megatron.lua — placement for Megatron-LM (and NeMo, Megatron-DeepSpeed).
--
-- Megatron forms its process groups from rank numbers alone: the order
-- string (job.order, default "tp-cp-ep-dp-pp"; --order to change, e.g.
-- "tp-cp-ep-pp-dp" for --use-tp-pp-dp-mapping) lists the dimensions
-- fastest-varying first, rank = sum(coord * stride). This policy never
-- changes that arithmetic; it chooses which GPU each rank runs on so that:
--   1. every TP group sits inside one NVLink domain: several TP groups per
--      node when tp < GPUs per node, across nodes only inside a multi-node
--      NVLink domain (GB200 NVL72, Slurm topology/block);
--   2. every pipeline's stages sit on nodes of one rack, consecutive stages
--      on the same or adjacent nodes (the rack's nodes in list order);
--   3. DP spans the rest;
--   4. rank 0 lands on the job's first node.
-- When the hardware cannot satisfy a rule, the layout degrades to the next
-- best (a TP group across a node's domains, then across nodes; a pipeline
-- across racks) and a note names the rule and why.
-- The work is done by par3d.layout_nested (lua/par3d/layout.lua): O(nodes)
-- Lua work, the per-rank part in C (par3d.result).
--
-- Spares (--spares K, spares() below): par3d.default_spares' spread over
-- racks, or over each rack's multi-node NVLink domains (par3d.spare_units:
-- a unit gives its k-th spare only after every unit with room gave k-1),
-- but when a block of ranks that must stay together needs B > 1 whole
-- nodes, within each round the units whose usable node count is not a
-- multiple of B give first: their last node could not hold a whole block
-- anyway. The block is a tensor-parallel group (tp ranks) when it spans
-- nodes of a multi-node NVLink domain (its collectives must stay on that
-- fabric), else a pipeline block (tp*cp*pp ranks, kept in one rack). For
-- TP blocks whole blocks come before the spread (a TP group split over two
-- domains is an error; a spare in another domain is only a slower heal):
-- two NVL72 racks of 18 trays, tp 8 (2 trays), --spares 2 take both from
-- the first rack, --spares 4 two from each.

local function lexically_less(a, b)
  for i = 1, #a do
    if a[i] ~= b[i] then return a[i] < b[i] end
  end
  return false
end

function spares(cluster, job)
  local moe = (job.ep or 1) > 1 or (job.etp or job.tp) ~= job.tp
  local per, block = nil, (job.tp or 1) * (job.cp or 1) * (job.pp or 1)
  for _, nd in ipairs(cluster.nodes) do
    if per and nd.ngpus ~= per then per = 0 end
    per = per or nd.ngpus
  end
  local tp, nvl, tpblock = job.tp or 1, #par3d.nvlink_domains(cluster) > 0, false
  if nvl and per and per >= 1 and tp > per and tp % per == 0 then
    block, tpblock = tp, true -- a TP group over several trays of one NVLink domain
  end
  -- B = 1 (a node holds whole blocks), mixed nodes, MoE: the default rule
  if moe or not per or per < 1 or block <= per or block % per ~= 0 then
    return par3d.default_spares(cluster, job)
  end
  local B = block // per
  local racks, out, left, given = par3d.spare_units(cluster), {}, {}, {}
  for r, rk in ipairs(racks) do left[r], given[r] = #rk.nodes, 0 end
  while #out < job.spares do
    local best, bkey
    for r in ipairs(racks) do
      if left[r] >= 1 then
        -- pipeline blocks: a rack keeps a node while any rack has two;
        -- fewest spares given; a node that costs no whole block; list order.
        -- TP blocks: a TP group split over two NVLink domains is an error
        -- (TP_CROSSES_NODES), a far spare only a slower recovery: a node
        -- that costs no whole block first, then the spread
        local whole = left[r] % B ~= 0 and 0 or 1
        local key = tpblock and {whole, left[r] < 2 and 1 or 0, given[r], r}
          or {left[r] < 2 and 1 or 0, given[r], whole, r}
        if not bkey or lexically_less(key, bkey) then best, bkey = r, key end
      end
    end
    if not best then
      error(string.format("--spares %d: only %d usable nodes", job.spares, #cluster.nodes), 0)
    end
    out[#out + 1] = cluster.nodes[racks[best].nodes[left[best]]].name
    left[best], given[best] = left[best] - 1, given[best] + 1
  end
  return out
end

function place(cluster, job)
  -- a lost node: keep every healthy rank, move its ranks to a spare
  if job.previous then return par3d.replace(cluster, job) end
  -- MoE: keep each EP group (etp*ep ranks) with its TP groups in one NVLink
  -- domain, else one node, else one rack (par3d.place_ep)
  local moe = (job.ep or 1) > 1 or (job.etp or job.tp) ~= job.tp
  local result, notes = (moe and par3d.place_ep or par3d.layout_nested)(cluster, job)
  -- par3d.pack counts blocks of ranks packed together (one block holds
  -- several pipelines: all tp lanes of a model replica's stages), while
  -- the PP_CROSSES_RACKS check counts pipelines (PP groups). Say which so
  -- "1 of 9" here and "8 of 72" there do not read as a contradiction.
  local block = (job.cp or 1) > 1 and "tp x cp x pp" or "tp x pp"
  for i, n in ipairs(notes or {}) do
    notes[i] = n:gsub("(%d+ of %d+) pipelines span racks",
                      "%1 pipeline blocks (" .. block .. " ranks each) span racks", 1)
  end
  return result, notes
end
