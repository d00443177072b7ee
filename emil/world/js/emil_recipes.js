'use strict'
// Crafting recipes from minecraft-data, grouped and matched as vanilla matches them. Pure
// functions, no server or bot state: the server's crafting grid (emil_squid_windows.js) and
// Emil's craft tool (emil_act_crafting.js) read the same families, so what the tool plans is
// what the server accepts.
//
// minecraft-data spells a tag ingredient (#planks, #logs, #stone_tool_materials...) as one
// recipe per member, the member repeated in every cell the tag fills: a wooden pickaxe is listed
// once with 3 oak_planks, once with 3 spruce_planks, and so on. Vanilla checks each cell on its
// own, so 2 oak and 1 birch planks make a pickaxe too. Here the variants with the same result,
// result count and shape are one *family*, each cell accepting any item its variants put there.
// A cell that varies alone (torch: coal or charcoal) means exactly what the separate recipes
// mean; cells that vary together are read as one tag, which is what minecraft-data's listing
// of tags produces. Shapeless recipes are grouped the same way when what varies between the
// variants is one item repeated (the tag case); otherwise each stays its own recipe.
//
// A shaped recipe matches the grid's filled area in its own shape or mirrored left to right; a
// shapeless one matches the grid's items in any order.

// vanilla Item.craftingRemainingItem: what stays in the grid after the item is used
const REMAINDERS = {
  milk_bucket: 'bucket',
  water_bucket: 'bucket',
  lava_bucket: 'bucket',
  powder_snow_bucket: 'bucket',
  honey_bottle: 'glass_bottle',
  dragon_breath: 'glass_bottle'
}

const empty = (id) => id === null || id === undefined || id === -1
const idOf = (i) => (typeof i === 'object' && i !== null ? i.id : i)

// rows of ids (null for empty), cut to the filled rectangle
function trimShape (rows) {
  let grid = rows.map((row) => row.map((id) => (empty(id) ? null : idOf(id))))
  const width = Math.max(0, ...grid.map((r) => r.length))
  grid = grid.map((r) => [...r, ...Array(width - r.length).fill(null)])
  while (grid.length && grid[0].every((c) => c === null)) grid.shift()
  while (grid.length && grid[grid.length - 1].every((c) => c === null)) grid.pop()
  if (!grid.length) return []
  const emptyCol = (x) => grid.every((r) => r[x] === null)
  let left = 0
  let right = grid[0].length - 1
  while (left <= right && emptyCol(left)) left++
  while (right >= left && emptyCol(right)) right--
  return grid.map((r) => r.slice(left, right + 1))
}

// Multiset difference: a minus b (both arrays of ids).
function minus (a, b) {
  const left = [...b]
  return a.filter((id) => {
    const k = left.indexOf(id)
    if (k === -1) return true
    left.splice(k, 1)
    return false
  })
}

// Every crafting family of the registry: { byResult: Map(id -> [family]), shaped, shapeless }.
// A shaped family: { result, width, height, cells: [Set|null] } (row by row); a shapeless one:
// { result, slots: [Set] }. `result` is {id, count}.
function craftingFamilies (registry) {
  const shapedGroups = new Map()
  const shapelessGroups = new Map()
  for (const recipes of Object.values(registry.recipes)) {
    for (const r of recipes) {
      const result = { id: idOf(r.result.id ?? r.result), count: r.result.count || 1 }
      if (r.inShape) {
        const shape = trimShape(r.inShape)
        const key = `${result.id}x${result.count}:${shape.map((row) => row.map((c) => (c === null ? '.' : '#')).join('')).join('/')}`
        if (!shapedGroups.has(key)) shapedGroups.set(key, { result, width: shape[0].length, height: shape.length, variants: [] })
        shapedGroups.get(key).variants.push(shape.flat())
      } else if (r.ingredients) {
        const ids = r.ingredients.map(idOf).sort((x, y) => x - y)
        const key = `${result.id}x${result.count}:${ids.length}`
        if (!shapelessGroups.has(key)) shapelessGroups.set(key, { result, variants: [] })
        shapelessGroups.get(key).variants.push(ids)
      }
    }
  }
  const shaped = []
  for (const g of shapedGroups.values()) {
    const cells = g.variants[0].map((id, k) => (id === null ? null : new Set(g.variants.map((v) => v[k]))))
    shaped.push({ result: g.result, width: g.width, height: g.height, cells })
  }
  const shapeless = []
  for (const g of shapelessGroups.values()) {
    let common = g.variants[0]
    for (const v of g.variants.slice(1)) common = minus(common, minus(common, v))
    const varying = g.variants.map((v) => minus(v, common))
    const k = varying[0].length
    const oneItemRepeated = varying.every((v) => v.length === k && v.every((id) => id === v[0]))
    if (g.variants.length > 1 && k > 0 && oneItemRepeated) {
      const members = new Set(varying.map((v) => v[0]))
      shapeless.push({ result: g.result, slots: [...common.map((id) => new Set([id])), ...Array(k).fill(members)] })
    } else {
      for (const v of g.variants) shapeless.push({ result: g.result, slots: v.map((id) => new Set([id])) })
    }
  }
  const byResult = new Map()
  for (const f of [...shaped, ...shapeless]) {
    if (!byResult.has(f.result.id)) byResult.set(f.result.id, [])
    byResult.get(f.result.id).push(f)
  }
  return { byResult, shaped, shapeless }
}

// The grid a family needs: 3x3 (a crafting table) when it does not fit the inventory's 2x2.
function needsTable (family) {
  return family.cells ? family.width > 2 || family.height > 2 : family.slots.length > 4
}

// Can these items (ids, any order) fill these slots (sets), one item per slot?
function fillsSlots (ids, slots) {
  if (ids.length !== slots.length) return false
  const used = Array(slots.length).fill(false)
  const place = (i) => {
    if (i === ids.length) return true
    for (let k = 0; k < slots.length; k++) {
      if (used[k] || !slots[k].has(ids[i])) continue
      used[k] = true
      if (place(i + 1)) return true
      used[k] = false
    }
    return false
  }
  return place(0)
}

function createCrafting (registry) {
  const { shaped, shapeless } = craftingFamilies(registry)
  const shapedByDims = new Map()
  for (const f of shaped) {
    const key = `${f.width}x${f.height}`
    if (!shapedByDims.has(key)) shapedByDims.set(key, [])
    shapedByDims.get(key).push(f)
  }
  const fits = (f, flat, width) => f.cells.every((cell, k) => {
    const id = flat[Math.floor(k / f.width) * width + (k % f.width)]
    return cell === null ? id === null : id !== null && cell.has(id)
  })

  // items: the grid's slots row by row (null for empty); returns {id, count} or null
  function match (items, width) {
    const rows = []
    for (let y = 0; y * width < items.length; y++) rows.push(items.slice(y * width, (y + 1) * width).map((it) => (it ? it.type : null)))
    const filled = items.filter(Boolean).map((it) => it.type)
    if (!filled.length) return null
    const shape = trimShape(rows)
    const h = shape.length
    const w = shape[0].length
    const flat = shape.flat()
    const mirrored = shape.map((row) => [...row].reverse()).flat()
    for (const f of shapedByDims.get(`${w}x${h}`) || []) {
      if (fits(f, flat, w) || fits(f, mirrored, w)) return { ...f.result }
    }
    for (const f of shapeless) {
      if (fillsSlots(filled, f.slots)) return { ...f.result }
    }
    return null
  }

  function remainder (item) {
    const name = registry.items[item.type]?.name
    const left = name && REMAINDERS[name]
    return left ? registry.itemsByName[left] : null
  }

  return { match, remainder }
}

module.exports = { craftingFamilies, createCrafting, needsTable, trimShape }
