-- SPDX-License-Identifier: BSD-3-Clause
-- par3d/racks.lua — pipelines at the level of racks: how many units to
-- take from each rack (par3d.rack_counts), in which order fragments are
-- laid (par3d.fragment_order) and packing units into blocks (par3d.pack).
-- lua/par3d.lua loads it through the sandbox's module loader and passes
-- the module table, the C core and the helpers the modules share.

local par3d = ...
-- whole runs of units copied in C (table.move, charged per element)
local move = table.move

---------------------------------------------------------------------------
-- Pipelines at the level of racks. k blocks of `per` units each (a block is
-- the cp*ep*pp units of one model replica; with cp = ep = 1 a pipeline)
-- are cut from u[r] units of each rack r. A block inside one rack is pure.
-- Given u, at most sum floor(u[r] / per) blocks are pure, and using that
-- many is best (breaking one only adds a mixed block); the remainders
-- f[r] = u[r] mod per (the fragments) fill the m = k - pure mixed blocks.
-- Laid end to end in some order and cut every `per` units, fragments make
-- the mixed blocks; a block's cross-rack hops are the racks it touches - 1,
-- in all #fragments - q where q is how many times the running sum lands on
-- a multiple of per (a fragment split over two blocks costs one hop more).
-- par3d.fragment_order finds the order with the most such landings
-- (exhaustively over subsets when there are at most 12 fragments, else
-- largest first), so the cost of u is (m, #fragments - q): objectives 4
-- and 5 divided by tp.
---------------------------------------------------------------------------

-- frags: list of sizes (each 1..per-1). Returns order (list of indices into
-- frags) and q.
function par3d.fragment_order(frags, per)
  local n = #frags
  local idx = {}
  for i = 1, n do idx[i] = i end
  if n == 0 then return idx, 0 end
  if n > 12 then
    table.sort(idx, function(a, b)
      if frags[a] ~= frags[b] then return frags[a] > frags[b] end
      return a < b
    end)
    -- largest first, then whatever exactly closes the open block
    local out, used, q, sum = {}, {}, 0, 0
    for _ = 1, n do
      local want = (per - sum % per) % per
      local pick
      if want > 0 then
        for _, i in ipairs(idx) do
          if not used[i] and frags[i] == want then pick = i break end
        end
      end
      if not pick then
        for _, i in ipairs(idx) do
          if not used[i] then pick = i break end
        end
      end
      used[pick] = true
      out[#out + 1] = pick
      sum = sum + frags[pick]
      if sum % per == 0 then q = q + 1 end
    end
    return out, q
  end
  -- best[mask]: most landings ordering the fragments in mask first; the
  -- sum of a mask is fixed, so whether it lands does not depend on order
  local full = (1 << n) - 1
  local best, from, sum = {[0] = 0}, {}, {[0] = 0}
  for mask = 1, full do
    local low = mask & -mask
    local b = 0
    while (1 << b) ~= low do b = b + 1 end
    sum[mask] = sum[mask ~ low] + frags[b + 1]
    local land = (sum[mask] % per == 0) and 1 or 0
    local bv, bi = -1, nil
    for i = 0, n - 1 do
      local bit = 1 << i
      if mask & bit ~= 0 then
        local v = best[mask ~ bit]
        if v > bv then bv, bi = v, i end
      end
    end
    best[mask], from[mask] = bv + land, bi
  end
  local out, mask = {}, full
  while mask ~= 0 do
    local i = from[mask]
    table.insert(out, 1, i + 1)
    mask = mask ~ (1 << i)
  end
  return out, best[full]
end

-- The cost of unit counts u: mixed blocks, cross-rack hops per lane.
function par3d.rack_cost(u, per, k)
  local pure, frags = 0, {}
  for r = 1, #u do
    pure = pure + u[r] // per
    local f = u[r] % per
    if f > 0 then frags[#frags + 1] = f end
  end
  local _, q = par3d.fragment_order(frags, per)
  return k - pure, #frags - q
end

local function better(m1, h1, m2, h2)
  return m1 < m2 or (m1 == m2 and h1 < h2)
end

-- par3d.rack_counts(lo, hi, per, k) -> u, mixed, hops: units per rack
-- (lo[r] <= u[r] <= hi[r], sum k*per) for k blocks of per units, chosen for
-- objectives 4 and 5. Greedy: complete the fragments the lower bounds
-- force (cheapest first), whole blocks rack by rack in walking order, the
-- remainder into the racks with most room; then a local search moves 1 to
-- per units between two racks while that lowers (mixed, hops), when some
-- block is mixed and there are at most 64 racks.
function par3d.rack_counts(lo, hi, per, k)
  local n = #lo
  local u, room = {}, 0
  local R = k * per
  for r = 1, n do
    u[r] = lo[r]
    R = R - lo[r]
    room = room + hi[r] - lo[r]
  end
  if R < 0 or R > room then
    error(string.format("cannot place %d units of blocks of %d within the racks' bounds", k * per, per), 2)
  end
  -- 1. complete forced fragments, cheapest first
  local open = {}
  for r = 1, n do
    local f = u[r] % per
    if f > 0 and u[r] + per - f <= hi[r] then open[#open + 1] = r end
  end
  table.sort(open, function(a, b)
    local ca, cb = per - u[a] % per, per - u[b] % per
    if ca ~= cb then return ca < cb end
    return a < b
  end)
  for _, r in ipairs(open) do
    local c = per - u[r] % per
    if c <= R then
      u[r] = u[r] + c
      R = R - c
    end
  end
  -- 2. whole blocks, racks in walking order
  for r = 1, n do
    if R < per then break end
    local b = math.min((hi[r] - u[r]) // per, R // per)
    u[r] = u[r] + b * per
    R = R - b * per
  end
  -- 3. the rest where there is most room
  while R > 0 do
    local br, bv = nil, 0
    for r = 1, n do
      if hi[r] - u[r] > bv then br, bv = r, hi[r] - u[r] end
    end
    local t = math.min(bv, R)
    u[br] = u[br] + t
    R = R - t
  end
  local m, h = par3d.rack_cost(u, per, k)
  if (m > 0 or h > 0) and n <= 64 then
    local improved = true
    local rounds = 0
    while improved and rounds < 200 do
      improved = false
      rounds = rounds + 1
      for a = 1, n do
        for b = 1, n do
          if a ~= b then
            local dmax = math.min(u[a] - lo[a], hi[b] - u[b], per)
            for d = 1, dmax do
              u[a], u[b] = u[a] - d, u[b] + d
              local m2, h2 = par3d.rack_cost(u, per, k)
              if better(m2, h2, m, h) then
                m, h, improved = m2, h2, true
                break
              end
              u[a], u[b] = u[a] + d, u[b] - d
            end
          end
        end
      end
    end
  end
  return u, m, h
end

---------------------------------------------------------------------------
-- Packing units into blocks that should share a rack (pipelines).
-- par3d.pack(U, per, count [, notes, label, why]) cuts `count` blocks of
-- `per` units from U: with more units than needed it first chooses how
-- many to take from each rack (par3d.rack_counts); each rack's units in
-- order give its whole blocks, its remainder is a fragment, and the
-- fragments, ordered by par3d.fragment_order, are cut into the blocks
-- that must span racks (each touching the fewest racks, its units rack by
-- rack, so its cross-rack hops are the racks it touches - 1). Returns a
-- flat list of unit numbers: block g (0-based) is order[g*per+1 ..
-- (g+1)*per]; blocks are ordered by their first unit, so the first unit of
-- the walk stays first. `why`, when given, ends the note on blocks that
-- span racks (the caller knows the cause better).
---------------------------------------------------------------------------

-- The packing itself: order, and nil or {count = blocks that span racks,
-- whole = blocks inside one rack, largest = units of the largest rack}.
local function pack_blocks(U, per, count)
  local byrack, racks = {}, {}
  for u = 1, U.n do
    local r = U.rack[u]
    local l = byrack[r]
    if not l then
      l = {}
      byrack[r] = l
      racks[#racks + 1] = r
    end
    l[#l + 1] = u
  end
  if U.n < count * per then
    error(string.format("only %d units for %d groups of %d", U.n, count, per), 2)
  end
  local lo, hi = {}, {}
  for k, r in ipairs(racks) do
    hi[k] = #byrack[r]
    lo[k] = U.n == count * per and hi[k] or 0
  end
  local take = par3d.rack_counts(lo, hi, per, count)
  local groups, frags, fsize = {}, {}, {}
  local largest = 0
  for k, r in ipairs(racks) do
    local l, n = byrack[r], take[k]
    if hi[k] > largest then largest = hi[k] end
    local whole = n // per
    for g = 0, whole - 1 do
      groups[#groups + 1] = move(l, g * per + 1, g * per + per, 1, {})
    end
    if n > whole * per then
      local f = move(l, whole * per + 1, n, 1, {})
      frags[#frags + 1] = f
      fsize[#fsize + 1] = #f
    end
  end
  local crossing = count - #groups
  if crossing > 0 then
    local forder = par3d.fragment_order(fsize, per)
    local run = {}
    for _, i in ipairs(forder) do
      move(frags[i], 1, #frags[i], #run + 1, run)
    end
    for g = 0, crossing - 1 do
      groups[#groups + 1] = move(run, g * per + 1, g * per + per, 1, {})
    end
  end
  table.sort(groups, function(x, y) return x[1] < y[1] end)
  local order = {}
  for g, grp in ipairs(groups) do
    move(grp, 1, per, (g - 1) * per + 1, order)
  end
  return order, crossing > 0 and {count = crossing, whole = count - crossing, largest = largest} or nil
end

-- par3d.pack_blocks(U, per, count) -> order, crossed: par3d.pack without
-- wording: crossed is nil when every block sits inside one rack, else
-- {count = blocks that span racks, whole = blocks inside one rack, largest
-- = units of the rack with most}, for the caller to say in its own words
par3d.pack_blocks = pack_blocks

function par3d.pack(U, per, count, notes, label, why)
  local order, crossed = pack_blocks(U, per, count)
  if crossed and notes then
    notes[#notes + 1] = string.format(
      "%s rule degraded: %d of %d %ss span racks (each needs %d GPUs; %s)",
      label or "group", crossed.count, count, label or "group", per * U.size,
      why or string.format("the racks' units hold only %d whole ones, the largest rack offers %d usable GPUs",
        crossed.whole, crossed.largest * U.size))
  end
  return order
end
