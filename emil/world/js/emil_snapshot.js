'use strict'
// One call that answers "how am I and what is around me" as a small plain object.

const { BEDS } = require('./emil_act_sleep')

const NOTABLE = [
  'oak_log', 'birch_log', 'spruce_log', 'jungle_log', 'acacia_log', 'dark_oak_log', 'cherry_log', 'mangrove_log',
  'crafting_table', 'furnace', 'chest', 'trapped_chest', ...BEDS, 'water', 'lava',
  'coal_ore', 'iron_ore', 'copper_ore', 'gold_ore', 'diamond_ore', 'redstone_ore', 'lapis_ore',
  'deepslate_iron_ore', 'deepslate_diamond_ore', 'stone', 'cobblestone', 'sand', 'gravel'
]
const RADIUS = 16
const BLOCK_CACHE_MS = 2000

function r1 (x) { return Math.round(x * 10) / 10 }

// Scanning for blocks is the slow part (tens of ms): reuse the answer for a moment.
function notableBlocks (ctl, bot, me) {
  const now = Date.now()
  const cache = ctl._blockCache
  if (cache && now - cache.at < BLOCK_CACHE_MS && cache.from.distanceTo(me) < 2) return cache.blocks
  const ids = NOTABLE.map((n) => bot.registry.blocksByName[n]).filter(Boolean).map((b) => b.id)
  const nearest = {}
  for (const p of bot.findBlocks({ matching: ids, maxDistance: RADIUS, count: 200 })) {
    const b = bot.blockAt(p)
    if (!b) continue
    const d = r1(p.distanceTo(me))
    const n = nearest[b.name]
    if (!n) nearest[b.name] = { name: b.name, count: 1, nearest: { x: p.x, y: p.y, z: p.z }, distance: d }
    else { n.count++; if (d < n.distance) { n.distance = d; n.nearest = { x: p.x, y: p.y, z: p.z } } }
  }
  const blocks = Object.values(nearest).sort((a, b) => a.distance - b.distance).slice(0, 12)
  ctl._blockCache = { at: now, from: me.clone(), blocks }
  return blocks
}

function snapshot (ctl) {
  const bot = ctl.bot
  if (!bot || !bot.entity) return { connected: false }
  const me = bot.entity.position
  const inventory = {}
  for (const item of bot.inventory.items()) inventory[item.name] = (inventory[item.name] || 0) + item.count
  const players = []
  const mobs = []
  for (const e of Object.values(bot.entities)) {
    if (e === bot.entity || !e.position) continue
    const d = e.position.distanceTo(me)
    if (d > 48) continue
    if (e.type === 'player') players.push({ name: e.username, distance: r1(d), position: { x: r1(e.position.x), y: r1(e.position.y), z: r1(e.position.z) } })
    else if (['hostile', 'mob', 'animal', 'passive', 'water_creature', 'ambient'].includes(e.type)) {
      mobs.push({ name: e.name, distance: r1(d), hostile: e.type === 'hostile' })
    }
  }
  players.sort((a, b) => a.distance - b.distance)
  mobs.sort((a, b) => a.distance - b.distance)
  const below = bot.blockAt(me.offset(0, -0.5, 0))
  return {
    connected: true,
    username: bot.username,
    position: { x: r1(me.x), y: r1(me.y), z: r1(me.z) },
    yaw: Math.round(bot.entity.yaw * 100) / 100,
    pitch: Math.round(bot.entity.pitch * 100) / 100,
    health: r1(bot.health),
    food: r1(bot.food),
    time_of_day: bot.time ? bot.time.timeOfDay : 0,
    dimension: String(bot.game.dimension || 'overworld').replace('minecraft:', ''),
    raining: !!bot.isRaining,
    held: bot.heldItem ? bot.heldItem.name : null,
    standing_on: below ? below.name : null,
    inventory,
    players: players.slice(0, 10),
    mobs: mobs.slice(0, 10),
    blocks: notableBlocks(ctl, bot, me),
    sleeping: !!bot.isSleeping,
    job: ctl.job ? ctl.job.name : null,
    following: ctl.following || null,
    reflexes: ctl.reflexState ? ctl.reflexState() : {}
  }
}

module.exports = { snapshot }
