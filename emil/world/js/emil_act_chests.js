'use strict'
// store and take: the JS halves of the Store and Take tools (emil/world/making.py). They open a
// chest with mineflayer's own openContainer (the chest at the given coordinates, or the nearest
// within 32 blocks), move the named items with window.deposit / window.withdraw, and say what
// did not fit (the chest, or the inventory, is full) and what was not there.
const { abortable, blockPos, itemByName, countOf, reach, nearestBlock, nearbyLoaded, serverView } = require('./emil_act_common')

const CHESTS = ['chest', 'trapped_chest']
const SEARCH_RADIUS = 32

// The chest block a store or take at { x, y, z } (or at none: the nearest) would open.
function locateChest (ctl, { x, y, z }) {
  const bot = ctl.bot
  let block
  if (x !== undefined && y !== undefined && z !== undefined) {
    block = bot.blockAt(new ctl.lib.Vec3(x, y, z))
    if (!block) throw new Error(`${x} ${y} ${z} is not loaded (too far)`)
    if (!CHESTS.includes(block.name)) throw new Error(`there is ${block.name}, not a chest, at ${x} ${y} ${z}`)
  } else {
    block = nearestBlock(bot, CHESTS, SEARCH_RADIUS)
    if (!block) throw new Error(`no chest within ${SEARCH_RADIUS} blocks`)
  }
  return block
}

// A chest beside another of its kind may open as one large chest (on vanilla servers): the
// owner check covers every chest block the window could show.
function chestBlocks (bot, block) {
  const out = [block]
  for (const [dx, dz] of [[1, 0], [-1, 0], [0, 1], [0, -1]]) {
    const b = bot.blockAt(block.position.offset(dx, 0, dz))
    if (b && b.name === block.name) out.push(b)
  }
  return out
}

// The chest a store or take would use, without opening it (the Python guard checks its owner).
async function findChest (ctl, args) {
  const bot = ctl.bot
  await nearbyLoaded(bot, new AbortController().signal, SEARCH_RADIUS)
  const block = locateChest(ctl, args || {})
  return {
    chest: blockPos(block.position),
    blocks: chestBlocks(bot, block).map((b) => blockPos(b.position)),
    dimension: bot.game && bot.game.dimension ? String(bot.game.dimension) : null
  }
}

async function openChest (ctl, at, signal) {
  const bot = ctl.bot
  await nearbyLoaded(bot, signal, SEARCH_RADIUS)
  const block = locateChest(ctl, at)
  const above = bot.blockAt(block.position.offset(0, 1, 0))
  if (above && above.boundingBox === 'block' && !above.transparent) {
    throw new Error(`the chest at ${block.position.x} ${block.position.y} ${block.position.z} cannot open: ${above.name} sits on it`)
  }
  await reach(ctl, block.position, signal)
  const window = await abortable(bot.openContainer(block), signal, () => {})
  return { block, window }
}

// Room for `id` in the window's slots [start, end): partial stacks plus empty slots.
function room (bot, window, id, start, end) {
  const max = bot.registry.items[id].stackSize
  let n = 0
  for (let s = start; s < end; s++) {
    const it = window.slots[s]
    if (!it) n += max
    else if (it.type === id && !it.nbt) n += max - it.count
  }
  return n
}

function contents (window) {
  const out = {}
  for (const i of window.containerItems()) out[i.name] = (out[i.name] || 0) + i.count
  return out
}

async function move (ctl, items, signal, direction) {
  const bot = ctl.bot
  for (const name of Object.keys(items.items)) itemByName(bot, name)
  const { block, window } = await openChest(ctl, items.at || {}, signal)
  const inChest = (id) => window.containerItems().filter((i) => i.type === id).reduce((n, i) => n + i.count, 0)
  // the chest as the server sent it on opening: what moved is measured against it afterwards
  const before = Object.fromEntries(Object.keys(items.items).map((name) => [name, inChest(bot.registry.itemsByName[name].id)]))
  const meant = {}
  const noRoom = {}
  const missing = {}
  try {
    for (const [name, want] of Object.entries(items.items)) {
      const id = bot.registry.itemsByName[name].id
      const there = direction === 'store' ? countOf(bot, name) : inChest(id)
      // mineflayer's withdraw refuses outright when the inventory has no empty slot
      const space = direction === 'store'
        ? room(bot, window, id, 0, window.inventoryStart)
        : (bot.inventory.emptySlotCount() === 0 ? 0 : room(bot, window, id, window.inventoryStart, window.inventoryEnd))
      const n = Math.min(want, there, space)
      if (there < want) missing[name] = want - there
      if (Math.min(want, there) > n) noRoom[name] = Math.min(want, there) - n
      if (n <= 0) continue
      if (direction === 'store') await window.deposit(id, null, n)
      else await window.withdraw(id, null, n)
      meant[name] = n
    }
    // what moved is what the server's chest shows, not what the clicks meant to move
    await serverView(bot, window)
    const moved = {}
    const unmoved = {}
    for (const [name, n] of Object.entries(meant)) {
      const change = inChest(bot.registry.itemsByName[name].id) - before[name]
      const got = Math.max(0, direction === 'store' ? change : -change)
      if (got > 0) moved[name] = got
      if (got < n) unmoved[name] = n - got
    }
    return { moved, no_room: noRoom, missing, unmoved, chest: blockPos(block.position), contents: contents(window) }
  } finally {
    window.close()
  }
}

async function store (ctl, { items, x, y, z }, signal) {
  const out = await move(ctl, { items, at: { x, y, z } }, signal, 'store')
  return { stored: out.moved, did_not_fit: out.no_room, not_in_inventory: out.missing, unmoved: out.unmoved, chest: out.chest, chest_holds: out.contents }
}

async function take (ctl, { items, x, y, z }, signal) {
  const out = await move(ctl, { items, at: { x, y, z } }, signal, 'take')
  return { took: out.moved, no_room: out.no_room, not_in_chest: out.missing, unmoved: out.unmoved, chest: out.chest, chest_holds: out.contents }
}

module.exports = { store, take, findChest, CHESTS }
