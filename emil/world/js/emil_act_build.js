'use strict'
// build: the JS half of the Build tool (emil/world/making.py). Places a named blueprint
// (emil_blueprints.js) with one kind of block from the inventory, checking first that there is
// enough of it (nothing is placed when it is short), then block by block, bottom-up, each against
// a solid neighbour, walking into reach when needed; stop and abort end it between two blocks.
const { BLUEPRINTS } = require('./emil_blueprints')
const { aborted, blockPos, itemByName, countOf, inventoryCounts, solid, leanable, spotNear, placeAt, loadedWithin } = require('./emil_act_common')

// blocks that are no good as walls: they fall, work, burn, or are worth more than a wall
const NOT_FOR_BUILDING = /^(sand|red_sand|gravel|tnt|crafting_table|furnace|chest|trapped_chest|barrel|.*_bed|.*_ore|.*_concrete_powder|.*shulker_box|scaffolding|.*_block_of_.*|diamond_block|emerald_block|gold_block|iron_block|netherite_block)$/
const PREFERRED = ['cobblestone', 'dirt', 'cobbled_deepslate', 'stone', 'netherrack']

function buildingBlock (bot, named) {
  if (named) {
    const info = itemByName(bot, named)
    const block = bot.registry.blocksByName[named]
    if (!block || block.boundingBox !== 'block') throw new Error(`${named} is not a solid block to build with`)
    return info.name
  }
  const counts = inventoryCounts(bot)
  const usable = Object.keys(counts).filter((n) => bot.registry.blocksByName[n]?.boundingBox === 'block' && !NOT_FOR_BUILDING.test(n))
  usable.sort((a, b) => (PREFERRED.includes(b) - PREFERRED.includes(a)) || counts[b] - counts[a])
  if (!usable.length) throw new Error('no building blocks in the inventory (cobblestone, dirt or planks will do)')
  return usable[0]
}

async function build (ctl, { blueprint, block, x, y, z, height }, signal) {
  const bot = ctl.bot
  const { Vec3 } = ctl.lib
  if (!Object.hasOwn(BLUEPRINTS, blueprint)) throw new Error(`no blueprint named ${blueprint}; blueprints are: ${Object.keys(BLUEPRINTS).join(', ')}`)
  const shape = BLUEPRINTS[blueprint]
  let origin
  if (x !== undefined && y !== undefined && z !== undefined) origin = new Vec3(x, y, z)
  else if (blueprint === 'shelter') origin = bot.entity.position.floored()
  else origin = spotNear(bot, { min: 2 })
  if (!origin) throw new Error('no free spot on solid ground nearby; give coordinates')
  const material = buildingBlock(bot, block)
  const spots = shape({ height }).map(([dx, dy, dz]) => origin.offset(dx, dy, dz))
  // right after a teleport or a respawn the server is still sending the chunks around: wait for
  // the spot before calling it too far
  const missing = await loadedWithin(bot, signal, () => spots)
  if (missing) throw new Error(`${missing.x} ${missing.y} ${missing.z} is not loaded (too far); build nearer`)
  const todo = spots.filter((p) => !solid(bot.blockAt(p)))
  const blocked = todo.filter((p) => bot.blockAt(p).boundingBox !== 'empty')
  if (blocked.length) throw new Error(`${blocked[0].x} ${blocked[0].y} ${blocked[0].z} is taken by ${bot.blockAt(blocked[0]).name}`)
  const have = countOf(bot, material)
  if (have < todo.length) {
    throw new Error(`a ${blueprint} here needs ${todo.length} ${material}, you have ${have}: missing ${todo.length - have} ${material}`)
  }
  let placed = 0
  while (todo.length) {
    aborted(signal)
    // the next block that has something solid to go against
    const touches = (test) => (p) => [[0, -1, 0], [1, 0, 0], [-1, 0, 0], [0, 0, 1], [0, 0, -1], [0, 1, 0]].some(([dx, dy, dz]) => test(bot.blockAt(p.offset(dx, dy, dz))))
    let k = todo.findIndex(touches(leanable))
    if (k === -1) k = todo.findIndex(touches(solid)) // against a table or chest: sneaking
    if (k === -1) throw new Error(`placed ${placed}; nothing solid to build the rest against (${todo.length} left)`)
    const [at] = todo.splice(k, 1)
    try {
      await placeAt(ctl, material, at, signal)
    } catch (err) {
      aborted(signal)
      throw new Error(`placed ${placed} of ${placed + todo.length + 1} ${material}, then at ${at.x} ${at.y} ${at.z}: ${err.message}`)
    }
    placed++
  }
  return { built: blueprint, block: material, placed, already: spots.length - placed, at: blockPos(origin) }
}

module.exports = { build }
