'use strict'
// What the coarse actions share: abort handling, walking, counting, finding and placing blocks.
// Every error thrown here carries a message the model can act on.

function aborted (signal) {
  if (signal.aborted) throw new Error(`aborted: ${signal.reason || 'stopped'}`)
}

// Run a promise but give up (and run onAbort) when the signal fires.
function abortable (promise, signal, onAbort) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) { onAbort(); reject(new Error(`aborted: ${signal.reason}`)); return }
    const listener = () => { onAbort(); reject(new Error(`aborted: ${signal.reason}`)) }
    signal.addEventListener('abort', listener, { once: true })
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', listener))
  })
}

function sleep (ms, signal) {
  return abortable(new Promise((resolve) => setTimeout(resolve, ms)), signal, () => {})
}

function playerEntity (bot, name) {
  const p = bot.players[name]
  if (!p) throw new Error(`no player named ${name} is online`)
  if (!p.entity) throw new Error(`${name} is online but too far away to see`)
  return p.entity
}

function round1 (x) { return Math.round(x * 10) / 10 }
function pos (p) { return { x: round1(p.x), y: round1(p.y), z: round1(p.z) } }
function blockPos (p) { return { x: p.x, y: p.y, z: p.z } }

function itemByName (bot, name) {
  const info = Object.hasOwn(bot.registry.itemsByName, name) ? bot.registry.itemsByName[name] : null
  if (!info) throw new Error(`'${name}' is not an item name (use names like oak_log, cobblestone)`)
  return info
}

// Items Emil holds for players this job may not use (the Python guard passes them with the job,
// emil/trust/ledger.py): every count below leaves them out, so a craft, a smelt or a build never
// plans with them.
function reservedOf (bot, name) {
  const r = bot.emilReserved
  return r && typeof r[name] === 'number' ? r[name] : 0
}

function countOf (bot, name) {
  const n = bot.inventory.items().filter((i) => i.name === name).reduce((n, i) => n + i.count, 0)
  return Math.max(0, n - reservedOf(bot, name))
}

function inventoryCounts (bot) {
  const counts = {}
  for (const i of bot.inventory.items()) counts[i.name] = (counts[i.name] || 0) + i.count
  for (const name of Object.keys(counts)) {
    counts[name] = Math.max(0, counts[name] - reservedOf(bot, name))
    if (counts[name] === 0) delete counts[name]
  }
  return counts
}

// "3 oak_planks, 2 stick" from {oak_planks: 3, stick: 2}
function listing (counts) {
  return Object.entries(counts).filter(([, n]) => n > 0).map(([name, n]) => `${n} ${name}`).join(', ')
}

async function goto (ctl, goal, signal) {
  const bot = ctl.bot
  try {
    await abortable(bot.pathfinder.goto(goal), signal, () => bot.pathfinder.stop())
  } catch (err) {
    aborted(signal)
    const msg = String(err && err.message)
    if (/No path|noPath|timeout|Took to long/i.test(msg)) throw new Error('no path there (blocked or too far)')
    if (/goal was changed|GoalChanged/i.test(msg)) throw new Error('interrupted by another movement')
    throw err
  }
}

// Walk until the block at `at` is within reach (4 blocks of the eyes), if it is not already.
async function reach (ctl, at, signal) {
  const bot = ctl.bot
  if (bot.entity.position.offset(0, 1.62, 0).distanceTo(at.offset(0.5, 0.5, 0.5)) <= 4) return
  await goto(ctl, new ctl.lib.goals.GoalLookAtBlock(at, bot.world, { reach: 4 }), signal)
}

// The nearest block whose name is in `names`, within `radius`; null when there is none.
function nearestBlock (bot, names, radius) {
  const ids = names.map((n) => bot.registry.blocksByName[n]).filter(Boolean).map((b) => b.id)
  if (!ids.length) return null
  return bot.findBlock({ matching: ids, maxDistance: radius })
}

// Wait (at most 3 s) until the chunks of `points()` are loaded: right after a teleport or a
// respawn the server has not sent them yet (flying-squid sends them one by one), every block
// there reads as unknown. Returns the first point still not loaded (undefined: all are).
async function loadedWithin (bot, signal, points) {
  const missing = () => points().find((p) => !bot.blockAt(p))
  for (let waited = 0; missing() && waited < 3000; waited += 100) await sleep(100, signal)
  return missing()
}

// The chunks around the bot, out to `radius` blocks: a search would otherwise answer "none
// within" for a block that is there.
async function nearbyLoaded (bot, signal, radius = 16) {
  const steps = []
  for (let d = -radius; d < radius; d += 16) steps.push(d)
  steps.push(radius)
  const around = () => {
    const p = bot.entity.position
    return steps.flatMap((dx) => steps.map((dz) => p.offset(dx, 0, dz)))
  }
  await loadedWithin(bot, signal, around)
}

// mineflayer clicks without waiting for the server (1.17+): before reporting what a window
// holds, have the server send the whole window (a click with an impossible state id), so the
// result is the server's, not the client's prediction.
async function serverView (bot, window) {
  if (typeof bot._syncWindow === 'function') await bot._syncWindow(window)
}

const solid = (b) => !!b && b.boundingBox === 'block'
// Using these opens or toggles them instead of placing against them (as a player without sneaking).
const INTERACTIVE = /(crafting_table|furnace|smoker|chest|barrel|shulker_box|_bed|door|gate|button|lever|anvil|_table|loom|stonecutter|grindstone|lectern|beacon|hopper|dispenser|dropper|enchanting_table|brewing_stand|note_block|jukebox|bell|repeater|comparator|daylight_detector)$/
const leanable = (b) => solid(b) && !INTERACTIVE.test(b.name)
const free = (b) => !!b && b.boundingBox === 'empty' && !/water|lava/.test(b.name)

// A spot near the bot to put one block down: free, on solid ground, not where the bot stands,
// within reach. `also(spot)` may ask more of it. Nearest first; null when there is none.
function spotNear (bot, { also = () => true, min = 1, max = 3 } = {}) {
  const feet = bot.entity.position.floored()
  const spots = []
  for (let dx = -max; dx <= max; dx++) {
    for (let dz = -max; dz <= max; dz++) {
      for (const dy of [0, -1, 1]) {
        const d = Math.hypot(dx, dz)
        if (d < min || d > max) continue
        spots.push({ p: feet.offset(dx, dy, dz), d: d + Math.abs(dy) * 0.5 })
      }
    }
  }
  spots.sort((a, b) => a.d - b.d)
  for (const { p } of spots) {
    if (free(bot.blockAt(p)) && solid(bot.blockAt(p.offset(0, -1, 0))) && also(p)) return p
  }
  return null
}

// Place one block of `item` (from the inventory) at `at`, against any solid neighbour, walking
// out of the spot or into reach first. Resolves with the block now there.
async function placeAt (ctl, item, at, signal) {
  const bot = ctl.bot
  const { goals, Vec3 } = ctl.lib
  const { x, y, z } = at
  const existing = bot.blockAt(at)
  if (!existing) throw new Error(`the spot ${x} ${y} ${z} is not loaded (too far)`)
  if (existing.boundingBox !== 'empty') throw new Error(`${x} ${y} ${z} is occupied by ${existing.name}`)
  const stack = bot.inventory.items().find((i) => i.name === item)
  if (!stack) throw new Error(`no ${item} in the inventory`)
  const faces = [[0, -1, 0], [0, 1, 0], [1, 0, 0], [-1, 0, 0], [0, 0, 1], [0, 0, -1]]
  // against a plain block if there is one; against a table, chest or bed only sneaking, as a
  // player does (using one without sneaking opens it instead)
  let ref = null
  let face = null
  for (const lean of [leanable, solid]) {
    for (const [dx, dy, dz] of faces) {
      const b = bot.blockAt(at.offset(dx, dy, dz))
      if (lean(b)) { ref = b; face = new Vec3(-dx, -dy, -dz); break }
    }
    if (ref) break
  }
  if (!ref) throw new Error(`nothing solid next to ${x} ${y} ${z} to place against`)
  const sneak = !leanable(ref)
  const feet = bot.entity.position.floored()
  if (feet.equals(at) || feet.offset(0, 1, 0).equals(at)) {
    await goto(ctl, new goals.GoalInvert(new goals.GoalNear(x, y, z, 1.5)), signal)
  }
  if (bot.entity.position.distanceTo(at.offset(0.5, 0.5, 0.5)) > 4.5) {
    await goto(ctl, new goals.GoalNear(x, y, z, 3), signal)
  }
  await bot.equip(stack, 'hand')
  aborted(signal)
  ctl.placing = { x, y, z, until: Date.now() + 5000 } // the chest Emil sees appear here is its own
  if (sneak) bot.setControlState('sneak', true)
  try {
    await bot.placeBlock(ref, face)
  } finally {
    if (sneak) bot.setControlState('sneak', false)
  }
  return bot.blockAt(at)
}

module.exports = {
  aborted,
  abortable,
  sleep,
  playerEntity,
  round1,
  pos,
  blockPos,
  itemByName,
  countOf,
  reservedOf,
  inventoryCounts,
  listing,
  goto,
  reach,
  nearestBlock,
  loadedWithin,
  nearbyLoaded,
  serverView,
  solid,
  leanable,
  free,
  spotNear,
  placeAt
}
