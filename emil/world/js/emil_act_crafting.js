'use strict'
// craft and smelt: the JS halves of the Craft and Smelt tools (emil/world/making.py).
//
// craft plans from the same recipe families the embedded server matches (emil_recipes.js: a tag
// ingredient accepts any of its members, so two kinds of planks make one pickaxe), names exactly
// what is missing when the inventory falls short, finds a crafting table within 32 blocks or
// places one from the inventory when the recipe needs the 3x3 grid, and crafts with mineflayer's
// own bot.craft (clicks through the real window; the server computes the result).
//
// smelt uses mineflayer's furnace window: collects finished output already in the furnace,
// takes out what is not its business, puts fuel (named, or the first plain fuel in the
// inventory) and input in, and takes the output as it comes, for up to `wait_s`; what is still
// cooking then is left in the furnace and reported, so a later smelt there collects it.
const { need } = require('./emil_require')
const { craftingFamilies, needsTable } = require('./emil_recipes')
const { COOK_TICKS, SMELTING, smeltsTo, burnTicks } = require('./emil_smelting')
const {
  aborted, abortable, sleep, blockPos, itemByName, countOf, inventoryCounts,
  reach, nearestBlock, nearbyLoaded, serverView, spotNear, placeAt
} = require('./emil_act_common')

const SEARCH_RADIUS = 32
const WAIT_S = 60 // the Smelt tool's default (at most 120; its time limit is 150 s)
// fuel taken without being named: plain burnables, never tools, chests or tables
const PLAIN_FUEL = [/^coal$/, /^charcoal$/, /^coal_block$/, /^blaze_rod$/, /^dried_kelp_block$/, /_planks$/, /_log$/, /_wood$/, /^stick$/]

const families = new WeakMap() // registry -> crafting families (built once, ~30 ms)
function familiesOf (bot) {
  if (!families.has(bot.registry)) families.set(bot.registry, craftingFamilies(bot.registry))
  return families.get(bot.registry)
}

const nameOf = (bot, id) => bot.registry.items[id].name

// How a set of interchangeable items reads: "stick", "coal or charcoal", "any planks".
function describe (bot, set) {
  const names = [...set].map((id) => nameOf(bot, id)).sort()
  if (names.length === 1) return names[0]
  if (names.length <= 3) return names.join(' or ')
  const suffix = names.map((n) => n.slice(n.lastIndexOf('_'))).every((s, _, all) => s === all[0]) ? names[0].slice(names[0].lastIndexOf('_') + 1) : null
  return suffix ? `any ${suffix} (${names.length} kinds)` : `one of ${names.slice(0, 3).join(', ')}...`
}

// The slots of a family grouped by what they accept: [{ set, per }] (per: slots per craft).
const keyOf = (set) => [...set].sort((a, b) => a - b).join(',')

function groups (family) {
  const slots = family.cells ? family.cells.filter(Boolean) : family.slots
  const byKey = new Map()
  for (const set of slots) {
    const key = keyOf(set)
    if (!byKey.has(key)) byKey.set(key, { set, key, per: 0 })
    byKey.get(key).per++
  }
  // the pickiest first, so a specific need is not starved by a broad one
  return [...byKey.values()].sort((a, b) => a.set.size - b.set.size)
}

// What `crafts` crafts of a family take from these counts (by id), and what is missing.
function plan (bot, family, crafts, counts) {
  const pool = { ...counts }
  const missing = []
  for (const g of groups(family)) {
    let need = g.per * crafts
    const members = [...g.set].sort((a, b) => (pool[b] || 0) - (pool[a] || 0))
    for (const id of members) {
      const n = Math.min(need, pool[id] || 0)
      pool[id] = (pool[id] || 0) - n
      need -= n
    }
    if (need > 0) {
      const have = members.reduce((sum, id) => sum + (counts[id] || 0), 0)
      missing.push({ what: describe(bot, g.set), need: g.per * crafts, have: Math.min(have, g.per * crafts), short: need })
    }
  }
  return { family, crafts, missing }
}

function countsById (bot) {
  const counts = {}
  for (const i of bot.inventory.items()) counts[i.type] = (counts[i.type] || 0) + i.count
  for (const [name, n] of Object.entries(bot.emilReserved || {})) {
    const item = bot.registry.itemsByName[name]
    if (item && counts[item.id]) counts[item.id] = Math.max(0, counts[item.id] - n)
  }
  return counts
}

// One craft's worth of concrete items for the family, taken from the inventory: each group of
// slots filled with one kind when one kind suffices (so the same choice repeats), else mixed.
function assign (family, counts) {
  const pool = { ...counts }
  const choice = new Map() // set key -> [ids for its slots, in order]
  for (const g of groups(family)) {
    const members = [...g.set].sort((a, b) => (pool[b] || 0) - (pool[a] || 0))
    const whole = members.find((id) => (pool[id] || 0) >= g.per)
    const ids = []
    for (let k = 0; k < g.per; k++) {
      const id = whole ?? members.find((m) => (pool[m] || 0) > 0)
      if (id === undefined) return null
      pool[id]--
      ids.push(id)
    }
    choice.set(g.key, ids)
  }
  const take = (set) => choice.get(keyOf(set)).shift()
  if (family.cells) {
    const rows = []
    for (let y = 0; y < family.height; y++) {
      rows.push(family.cells.slice(y * family.width, (y + 1) * family.width).map((set) => (set ? take(set) : null)))
    }
    return { inShape: rows, result: family.result }
  }
  return { ingredients: family.slots.map(take), result: family.result }
}

// How many times the same concrete recipe can repeat with these counts.
function repeats (raw, counts) {
  const uses = {}
  for (const id of (raw.inShape ? raw.inShape.flat() : raw.ingredients)) if (id !== null) uses[id] = (uses[id] || 0) + 1
  return Math.min(...Object.entries(uses).map(([id, n]) => Math.floor((counts[id] || 0) / n)))
}

function smeltedFrom (item) {
  const from = Object.keys(SMELTING).filter((input) => SMELTING[input] === item)
  return from.length ? `; it is also smelted from ${from.slice(0, 3).join(' or ')}` : ''
}

async function findOrPlace (ctl, blockName, signal, hint) {
  const bot = ctl.bot
  await nearbyLoaded(bot, signal) // just after a teleport, nothing is there yet
  const found = nearestBlock(bot, [blockName], SEARCH_RADIUS)
  if (found) return { block: found, placed: false }
  if (countOf(bot, blockName) === 0) throw new Error(`no ${blockName} within ${SEARCH_RADIUS} blocks and none in the inventory${hint ? ` (${hint})` : ''}`)
  const spot = spotNear(bot)
  if (!spot) throw new Error(`no free spot nearby to place a ${blockName}`)
  const block = await placeAt(ctl, blockName, spot, signal)
  if (!block || block.name !== blockName) throw new Error(`placing the ${blockName} at ${spot.x} ${spot.y} ${spot.z} failed`)
  return { block, placed: true }
}

async function craft (ctl, { item, count }, signal) {
  const bot = ctl.bot
  const info = itemByName(bot, item)
  const options = familiesOf(bot).byResult.get(info.id) || []
  if (!options.length) throw new Error(`${item} has no crafting recipe${smeltedFrom(item)}`)
  const want = count ?? 1
  const counts = countsById(bot)
  const plans = options.map((f) => plan(bot, f, Math.ceil(want / f.result.count), counts))
  const doable = plans.filter((p) => !p.missing.length)
  if (!doable.length) {
    const shortBy = (p) => p.missing.reduce((n, m) => n + m.short, 0)
    const lacks = (p) => p.missing.map((m) => `${m.short} ${m.what} (have ${m.have} of ${m.need})`).join(', ')
    const [closest, ...others] = [...new Map(plans.sort((a, b) => shortBy(a) - shortBy(b)).map((p) => [lacks(p), p])).values()]
    const alternatives = others.slice(0, 2).map((p) => `; or missing ${lacks(p)}`).join('')
    throw new Error(`cannot craft ${want} ${item}: missing ${lacks(closest)}${alternatives}${smeltedFrom(item)}`)
  }
  // the 2x2 grid needs no table: prefer it
  const chosen = doable.find((p) => !needsTable(p.family)) || doable[0]
  let table = null
  let placedTable = false
  if (needsTable(chosen.family)) {
    const found = await findOrPlace(ctl, 'crafting_table', signal, 'craft one from 4 planks')
    table = found.block
    placedTable = found.placed
    await reach(ctl, table.position, signal)
  }
  const Recipe = need('prismarine-recipe')(bot.registry).Recipe
  const before = inventoryCounts(bot)
  const made = countOf(bot, item)
  let left = chosen.crafts
  while (left > 0) {
    aborted(signal)
    const now = countsById(bot)
    const raw = assign(chosen.family, now)
    if (!raw) break
    const n = Math.min(left, repeats(raw, now))
    await abortable(bot.craft(new Recipe(raw), n, table), signal, () => { if (bot.currentWindow) bot.closeWindow(bot.currentWindow) })
    left -= n
  }
  await serverView(bot, bot.inventory)
  const after = inventoryCounts(bot)
  const used = {}
  for (const [name, n] of Object.entries(before)) if (name !== item && (after[name] || 0) < n) used[name] = n - (after[name] || 0)
  const crafted = countOf(bot, item) - made
  if (crafted <= 0) throw new Error(`crafting ${item} produced nothing (the server refused the recipe)`)
  return {
    crafted: item,
    count: crafted,
    asked: want,
    used,
    table: table ? { ...blockPos(table.position), placed: placedTable } : null
  }
}

function fuelFor (bot, item, fuel) {
  if (fuel) {
    itemByName(bot, fuel)
    if (!burnTicks(fuel)) throw new Error(`${fuel} does not burn in a furnace`)
    const have = countOf(bot, fuel) - (fuel === item ? 1 : 0)
    if (have <= 0) throw new Error(`no ${fuel} in the inventory to burn`)
    return fuel
  }
  const names = Object.keys(inventoryCounts(bot)).filter((n) => n !== item && burnTicks(n) > 0)
  for (const pattern of PLAIN_FUEL) {
    const hit = names.filter((n) => pattern.test(n)).sort((a, b) => countOf(bot, b) - countOf(bot, a))[0]
    if (hit) return hit
  }
  throw new Error('no fuel in the inventory (coal, charcoal, planks, logs or sticks burn)')
}

async function smelt (ctl, { item, count, fuel, wait_s: waitS }, signal) {
  const bot = ctl.bot
  const info = itemByName(bot, item)
  const output = smeltsTo(item)
  if (!output) throw new Error(`${item} cannot be smelted${smeltedFrom(item).replace('it is also', `${item} is`)}`)
  const want = count ?? 1
  // before a furnace is placed or walked to: is there anything to smelt, and to burn?
  await nearbyLoaded(bot, signal)
  if (!nearestBlock(bot, ['furnace'], SEARCH_RADIUS)) {
    if (countOf(bot, item) === 0) throw new Error(`no ${item} in the inventory`)
    fuelFor(bot, item, fuel)
  }
  const found = await findOrPlace(ctl, 'furnace', signal, 'craft one from 8 cobblestone at a crafting table')
  await reach(ctl, found.block.position, signal)
  const outId = bot.registry.itemsByName[output].id
  const furnace = await abortable(bot.openFurnace(found.block), signal, () => {})
  // the inventory part of the furnace window, as the server sent it on opening
  const outBefore = furnace.count(outId)
  const tookOut = {}
  let taken = 0
  let fuelName = null
  let fuelPut = 0
  let inputPut = 0
  try {
    const takeFrom = async (slot, fn) => {
      const it = furnace.slots[slot]
      if (!it) return null
      await fn()
      return it
    }
    // finished output first: ours counts toward the job, anything else goes to the inventory
    const out = await takeFrom(2, () => furnace.takeOutput())
    if (out && out.type === outId) taken += out.count
    else if (out) tookOut[out.name] = out.count
    const inputThere = furnace.inputItem()
    if (inputThere && inputThere.type !== info.id) tookOut[inputThere.name] = (await takeFrom(0, () => furnace.takeInput())).count
    const cooking = furnace.inputItem() ? furnace.inputItem().count : 0
    const toPut = Math.max(0, want - taken - cooking)
    const have = countOf(bot, item)
    let put = Math.min(toPut, have)
    const short = toPut > have ? `only had ${have} ${item}` : null
    // collecting only (put 0): what is in there burns on; adding fuel would waste it
    if (put > 0) {
      fuelName = fuelFor(bot, item, fuel)
      const fuelThere = furnace.fuelItem()
      if (fuelThere && fuelThere.name !== fuelName) tookOut[fuelThere.name] = (await takeFrom(1, () => furnace.takeFuel())).count
      const ticks = burnTicks(fuelName)
      const inSlot = furnace.fuelItem() ? furnace.fuelItem().count : 0
      const needed = Math.max(0, Math.ceil(((put + cooking) * COOK_TICKS) / ticks) - inSlot)
      const available = countOf(bot, fuelName) - (fuelName === item ? put : 0)
      fuelPut = Math.min(needed, available)
      if (fuelPut < needed) put = Math.max(0, Math.floor(((fuelPut + inSlot) * ticks) / COOK_TICKS) - cooking)
      if (fuelPut > 0) await furnace.putFuel(bot.registry.itemsByName[fuelName].id, null, fuelPut)
      if (put > 0) await furnace.putInput(info.id, null, put)
      inputPut = put
    }
    const expected = Math.min(want, taken + cooking + inputPut)
    if (expected === taken && taken === 0) {
      throw new Error(have === 0 ? `no ${item} in the inventory` : `not enough fuel to smelt ${item}`)
    }
    const started = Date.now()
    let lastOutput = Date.now()
    let stalled = false
    while (taken < expected && Date.now() - started < (waitS ?? WAIT_S) * 1000) {
      await sleep(250, signal)
      const ready = furnace.outputItem()
      if (ready && ready.type === outId) {
        const got = await furnace.takeOutput()
        taken += got ? got.count : 0
        lastOutput = Date.now()
      }
      // nothing for two smelts' time: the furnace is not burning (out of fuel, or taken over)
      if (Date.now() - lastOutput > 2 * COOK_TICKS * 50 + 2000) { stalled = true; break }
    }
    await serverView(bot, furnace)
    const remaining = furnace.inputItem() && furnace.inputItem().type === info.id ? furnace.inputItem().count : 0
    // what Emil got is what the server's window shows (the clicks only predicted it)
    const got = furnace.count(outId) - outBefore + (fuelName === output ? fuelPut : 0)
    return {
      smelted: item,
      output,
      count: got,
      asked: want,
      still_cooking: remaining,
      eta_s: remaining ? remaining * COOK_TICKS / 20 : 0,
      fuel: fuelName ? { name: fuelName, count: fuelPut } : null,
      took_out: tookOut,
      furnace: { ...blockPos(found.block.position), placed: found.placed },
      stalled,
      short: short || (inputPut < toPut && fuelName ? `fuel for only ${inputPut + cooking}` : null)
    }
  } finally {
    furnace.close()
  }
}

module.exports = { craft, smelt, findOrPlace }
