'use strict'
// Crafting recipes from minecraft-data, matched against a crafting grid as vanilla does:
// a shaped recipe matches the grid's filled area in its own shape or mirrored left to right; a
// shapeless one matches the grid's items in any order. Pure functions, no server state.
//
// minecraft-data lists a tag ingredient (any planks...) as one recipe per member, so a grid
// mixing two kinds of planks in one recipe matches nothing here, where vanilla would accept it.

// vanilla Item.craftingRemainingItem: what stays in the grid after the item is used
const REMAINDERS = {
  milk_bucket: 'bucket',
  water_bucket: 'bucket',
  lava_bucket: 'bucket',
  powder_snow_bucket: 'bucket',
  honey_bottle: 'glass_bottle',
  dragon_breath: 'glass_bottle'
}

function trimShape (rows) {
  let grid = rows.map((row) => row.map((id) => (id === null || id === undefined || id === -1 ? null : id)))
  const width = Math.max(...grid.map((r) => r.length))
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

function sameShape (a, b) {
  return a.length === b.length && a.every((row, y) => row.length === b[y].length && row.every((id, x) => id === b[y][x]))
}

function createCrafting (registry) {
  const shaped = []
  const shapeless = []
  for (const recipes of Object.values(registry.recipes)) {
    for (const r of recipes) {
      if (r.inShape) {
        const shape = trimShape(r.inShape)
        const mirrored = shape.map((row) => [...row].reverse())
        shaped.push({ shape, mirrored, result: r.result })
      } else if (r.ingredients) {
        const key = r.ingredients.map((i) => (typeof i === 'object' && i !== null ? i.id : i)).sort((a, b) => a - b).join(',')
        shapeless.push({ key, result: r.result })
      }
    }
  }

  // items: the grid's slots row by row (null for empty); returns {id, count} or null
  function match (items, width) {
    const rows = []
    for (let y = 0; y * width < items.length; y++) rows.push(items.slice(y * width, (y + 1) * width).map((it) => (it ? it.type : null)))
    const filled = items.filter(Boolean)
    if (!filled.length) return null
    const shape = trimShape(rows)
    for (const r of shaped) {
      if (sameShape(r.shape, shape) || sameShape(r.mirrored, shape)) return { id: r.result.id, count: r.result.count }
    }
    const key = filled.map((it) => it.type).sort((a, b) => a - b).join(',')
    for (const r of shapeless) {
      if (r.key === key) return { id: r.result.id, count: r.result.count }
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

module.exports = { createCrafting, trimShape }
