'use strict'
// Coarse actions: each does a whole job, honours an AbortSignal and returns a small plain
// result (or throws an Error whose message the model will read, e.g. "no oak_log within 32
// blocks"). Each is the JS half of one tool class in emil/world/chat.py, body.py, making.py or queries.py (same name), which
// validates the arguments before they get here, says whether it is a long job and how its
// result reads to the model. The longer ones live in their own files (emil_act_*.js) and are
// listed here with the rest.
const { bestFood } = require('./emil_reflexes')
const trust = require('./emil_trust')

const {
  aborted, abortable, sleep, playerEntity, round1, pos, itemByName, countOf, goto, placeAt, nearbyLoaded
} = require('./emil_act_common')
const { craft, smelt } = require('./emil_act_crafting')
const { build } = require('./emil_act_build')
const { store, take, findChest } = require('./emil_act_chests')
const { sleep: sleepInBed } = require('./emil_act_sleep')

const CHAT_LIMIT = 256

function targetPoint (ctl, args) {
  const { Vec3 } = ctl.lib
  if (args.player) return playerEntity(ctl.bot, args.player).position
  return new Vec3(args.x, args.y, args.z)
}

// Vanilla lets a thrown item be picked up after 40 ticks (2 s), flying-squid after 0.5 s: the
// receipt waits past both for whoever comes close. Item entities that appear by Emil while it
// throws are the throw's (one entity per item on flying-squid, one per stack on vanilla).
const RECEIPT_MS = 4000
const THROW_SPAWN_MS = 1000

// Runs `toss` and says where the thrown item entities went: `seen` of them, `received` (the
// target picked up), `others` (name -> how many someone else picked up) and `lying` (still on
// the ground when the receipt stopped waiting; `lying_from`: blocks from the target). What Emil
// caught again is counted by the caller, in items. A player who picks the items up later still
// gets them; the result says what was seen.
async function tossReceipt (bot, target, signal, toss) {
  const mine = new Map() // entity id -> who picked it up (null: lying)
  let tossing = true
  let tossedAt = Date.now()
  const onSpawn = (e) => {
    if (!e || e.name !== 'item' || !e.position || !bot.entity) return
    if (!tossing && Date.now() - tossedAt > THROW_SPAWN_MS) return
    if (e.position.distanceTo(bot.entity.position) <= 4) mine.set(e.id, null)
  }
  const onCollect = (collector, collected) => {
    if (!collected || !mine.has(collected.id)) return
    const who = collector === bot.entity ? bot.username : collector?.username
    mine.set(collected.id, who || 'someone')
  }
  bot.on('entitySpawn', onSpawn)
  bot.on('playerCollect', onCollect)
  try {
    await toss()
    tossing = false
    tossedAt = Date.now()
    const until = tossedAt + RECEIPT_MS
    const open = () => mine.size === 0 || [...mine.values()].some((v) => v === null)
    while (Date.now() < until && open()) await sleep(100, signal)
  } finally {
    bot.removeListener('entitySpawn', onSpawn)
    bot.removeListener('playerCollect', onCollect)
  }
  const who = [...mine.values()]
  const others = {}
  for (const w of who) if (w && w !== target.username && w !== bot.username) others[w] = (others[w] || 0) + 1
  const lying = [...mine].filter(([, w]) => w === null).map(([id]) => bot.entities[id]).filter(Boolean)
  const nearest = lying.length ? Math.min(...lying.map((e) => e.position.distanceTo(target.position))) : null
  return {
    received: who.filter((w) => w === target.username).length,
    others,
    lying: who.filter((w) => w === null).length,
    lying_from: nearest === null ? null : round1(nearest),
    seen: mine.size
  }
}

const ACTIONS = {
  // One chat piece per call, as Python cut it: no newline and within the limit, so mineflayer
  // sends exactly `line` in one packet, and the command rule (emil_trust.js) is checked on
  // exactly that line with the turn's authority.
  async say (ctl, { text, authority }) {
    const line = String(text).replace(/[\r\n]+/g, ' ').slice(0, CHAT_LIMIT)
    trust.checkChat(ctl, line, authority)
    ctl.bot.chat(line)
    return { said: line }
  },

  // mineflayer sends "/tell <player> <line>": a command by construction, whose last argument is
  // the text; the text itself passes the same rule as a public line.
  async whisper (ctl, { player, text, authority }) {
    const bot = ctl.bot
    if (!/^[A-Za-z0-9_]{1,16}$/.test(String(player))) throw new Error(`'${player}' is not a player name`)
    if (!bot.players[player]) throw new Error(`no player named ${player} is online`)
    const line = String(text).replace(/[\r\n]+/g, ' ').slice(0, CHAT_LIMIT - `/tell ${player} `.length)
    trust.checkChat(ctl, line, authority)
    bot.whisper(player, line)
    return { to: player, said: line }
  },

  async go_to (ctl, args, signal) {
    const { goals } = ctl.lib
    const bot = ctl.bot
    const range = args.range ?? 2
    let goal
    if (args.player) {
      const e = playerEntity(bot, args.player)
      goal = new goals.GoalNear(e.position.x, e.position.y, e.position.z, Math.max(range, 1))
    } else {
      goal = new goals.GoalNear(args.x, args.y, args.z, range)
    }
    await goto(ctl, goal, signal)
    return { position: pos(bot.entity.position) }
  },

  // Following is a standing goal: it returns at once and lasts until stop or another movement.
  async follow (ctl, { player, range }) {
    const { goals } = ctl.lib
    const bot = ctl.bot
    const e = playerEntity(bot, player)
    bot.pathfinder.setGoal(new goals.GoalFollow(e, range ?? 2), true)
    ctl.following = player
    return { following: player }
  },

  async stop (ctl) {
    const stopped = ctl.stopJob('stopped')
    const following = ctl.following
    ctl.halt()
    return { stopped: stopped || (following ? 'follow' : null) }
  },

  async look_at (ctl, args) {
    const bot = ctl.bot
    const p = targetPoint(ctl, args)
    await bot.lookAt(args.player ? p.offset(0, 1.6, 0) : p.offset(0.5, 0.5, 0.5), true)
    return { yaw: round1(bot.entity.yaw), pitch: round1(bot.entity.pitch) }
  },

  async collect (ctl, { block, count, max_distance: maxDistance }, signal) {
    const bot = ctl.bot
    const { goals } = ctl.lib
    const info = bot.registry.blocksByName[block]
    if (!info) throw new Error(`'${block}' is not a block name`)
    const want = count ?? 1
    const radius = maxDistance ?? 32
    const drop = (info.drops && info.drops.length) ? bot.registry.items[info.drops[0]] : null
    const dropName = drop ? drop.name : block
    const before = countOf(bot, dropName)
    let dug = 0
    const skipped = new Set()
    await nearbyLoaded(bot, signal, radius)
    while (dug < want) {
      aborted(signal)
      const found = bot.findBlocks({ matching: info.id, maxDistance: radius, count: 64 })
        .filter((p) => !skipped.has(p.toString()))
      if (found.length === 0) {
        if (dug === 0) throw new Error(`no ${block} within ${radius} blocks`)
        break
      }
      found.sort((a, b) => a.distanceTo(bot.entity.position) - b.distanceTo(bot.entity.position))
      const at = found[0]
      try {
        await goto(ctl, new goals.GoalLookAtBlock(at, bot.world, { reach: 4 }), signal)
        const target = bot.blockAt(at)
        if (!target || target.type !== info.id) { skipped.add(at.toString()); continue }
        await abortable(bot.tool.equipForBlock(target, {}), signal, () => {})
        await abortable(bot.dig(target, true), signal, () => bot.stopDigging())
      } catch (err) {
        aborted(signal)
        skipped.add(at.toString())
        continue
      }
      dug++
      // The drop lands on the block's spot: step onto it so the server hands it over.
      try {
        await goto(ctl, new goals.GoalNear(at.x, at.y, at.z, 0), signal)
      } catch (err) { aborted(signal) }
      const deadline = Date.now() + 1500
      while (countOf(bot, dropName) - before < dug && Date.now() < deadline) await sleep(100, signal)
    }
    const got = countOf(bot, dropName) - before
    return { dug, collected: { [dropName]: got } }
  },

  async dig (ctl, { x, y, z }, signal) {
    const bot = ctl.bot
    const { goals, Vec3 } = ctl.lib
    const at = new Vec3(x, y, z)
    const block = bot.blockAt(at)
    if (!block) throw new Error(`the block at ${x} ${y} ${z} is not loaded (too far)`)
    if (block.name === 'air' || block.boundingBox === 'empty') throw new Error(`nothing to dig at ${x} ${y} ${z} (${block.name})`)
    if (!block.diggable) throw new Error(`${block.name} cannot be dug`)
    if (bot.entity.position.distanceTo(at.offset(0.5, 0.5, 0.5)) > 4.5) {
      await goto(ctl, new goals.GoalLookAtBlock(at, bot.world, { reach: 4 }), signal)
    }
    await abortable(bot.tool.equipForBlock(block, {}), signal, () => {})
    await abortable(bot.dig(block, true), signal, () => bot.stopDigging())
    return { dug: block.name, at: { x, y, z } }
  },

  async place (ctl, { item, x, y, z }, signal) {
    const now = await placeAt(ctl, item, new ctl.lib.Vec3(x, y, z), signal)
    // the block Emil sees there now, not the item he held (its chunk can unload meanwhile)
    if (!now) throw new Error(`the spot ${x} ${y} ${z} went out of view before the block there could be seen`)
    return { placed: now.name, at: { x, y, z } }
  },

  async equip (ctl, { item, destination }) {
    const bot = ctl.bot
    itemByName(bot, item)
    const stack = bot.inventory.items().find((i) => i.name === item)
    if (!stack) throw new Error(`no ${item} in the inventory`)
    await bot.equip(stack, destination || 'hand')
    return { equipped: item, destination: destination || 'hand' }
  },

  async eat (ctl, { item }, signal) {
    const bot = ctl.bot
    let stack
    if (item) {
      stack = bot.inventory.items().find((i) => i.name === item)
      if (!stack) throw new Error(`no ${item} in the inventory`)
      if (!(bot.registry.foodsByName || {})[item]) throw new Error(`${item} is not food`)
    } else {
      stack = bestFood(bot)
      if (!stack) throw new Error('no food in the inventory')
    }
    if (bot.food >= 20) throw new Error('not hungry (food is full)')
    const before = bot.food
    await bot.equip(stack, 'hand')
    await abortable(bot.consume(), signal, () => bot.deactivateItem())
    return { ate: stack.name, food_before: before, food_after: bot.food }
  },

  async give (ctl, { player, item, count }, signal) {
    const bot = ctl.bot
    const { goals } = ctl.lib
    itemByName(bot, item)
    const have = countOf(bot, item)
    if (have === 0) throw new Error(`no ${item} in the inventory`)
    const n = Math.min(count ?? 1, have)
    const target = playerEntity(bot, player)
    // Stand about three blocks off so the thrown items land by the player, not back on Emil.
    await goto(ctl, new goals.GoalNear(target.position.x, target.position.y, target.position.z, 3), signal)
    if (target.position.distanceTo(bot.entity.position) < 2.5) {
      await goto(ctl, new goals.GoalInvert(new goals.GoalNear(target.position.x, target.position.y, target.position.z, 2.5)), signal).catch(() => {})
    }
    await bot.lookAt(target.position.offset(0, 1.0, 0), true)
    // the look goes out with the next physics tick; the server aims the throw with it
    await bot.waitForTicks(2)
    let thrown = 0
    const got = await tossReceipt(bot, target, signal, async () => {
      await bot.toss(bot.registry.itemsByName[item].id, null, n)
      thrown = countOf(bot, item)
    })
    // what Emil caught back is still Emil's, not given (counted in items, not entities)
    const back = Math.min(n, Math.max(0, countOf(bot, item) - thrown))
    return { gave: item, count: n - back, to: player, short: n < (count ?? 1) ? `only had ${have}` : null, ...got, back }
  },

  // Tossed where Emil stands, in one throw per stack; Python's guard decided whose items these may be.
  async drop (ctl, { item, count }) {
    const bot = ctl.bot
    itemByName(bot, item)
    const have = countOf(bot, item)
    if (have === 0) throw new Error(`no ${item} in the inventory`)
    const n = Math.min(count ?? 1, have)
    await bot.toss(bot.registry.itemsByName[item].id, null, n)
    return { dropped: item, count: n, short: n < (count ?? 1) ? `only had ${have}` : null }
  },

  async attack (ctl, { target, duration_s: durationS, authority }, signal) {
    const bot = ctl.bot
    const entity = trust.attackTarget(ctl, target, authority)
    const started = Date.now()
    const limit = started + (durationS ?? 10) * 1000
    let hits = 0
    let died = false
    const onHit = () => { hits++ }
    // the death is the server's word (entity status 3); an entity that leaves the client's view
    // without it is gone, not known to be dead
    const onDead = (e) => { if (e === entity) died = true }
    bot.on('attackedTarget', onHit)
    bot.on('entityDead', onDead)
    bot.pvp.attack(entity)
    try {
      while (Date.now() < limit && entity.isValid && !died) {
        aborted(signal)
        if (entity.position.distanceTo(bot.entity.position) > 32) throw new Error(`${target} got away`)
        await sleep(100, signal)
      }
    } finally {
      bot.removeListener('attackedTarget', onHit)
      bot.removeListener('entityDead', onDead)
      try { bot.pvp.forceStop() } catch (e) { /* done */ }
    }
    return { target, hits, defeated: died, gone: !died && !entity.isValid, fought_s: Math.round((Date.now() - started) / 100) / 10 }
  },

  async flee (ctl, { from, distance }, signal) {
    const bot = ctl.bot
    const { goals, Vec3 } = ctl.lib
    let threat = null
    if (from) {
      threat = bot.players[from] ? playerEntity(bot, from) : bot.nearestEntity((e) => e.name === from)
      if (!threat) throw new Error(`no ${from} in sight to flee from`)
    } else {
      threat = bot.nearestEntity((e) => e.type === 'hostile') || ctl.findAttacker()
    }
    const me = bot.entity.position
    let away = threat ? me.minus(threat.position) : new Vec3(1, 0, 0)
    away.y = 0
    if (away.norm() < 0.01) away = new Vec3(1, 0, 0)
    const target = me.plus(away.normalize().scaled(distance ?? 16))
    await goto(ctl, new goals.GoalNearXZ(target.x, target.z, 2), signal)
    return { fled_from: threat ? (threat.username || threat.name) : null, position: pos(bot.entity.position) }
  },

  craft,
  smelt,
  build,
  sleep: sleepInBed,
  store,
  take
}

// Calls of the Python guard (emil/world/guard.py) that belong to no tool: the bot runs them like
// actions, but no model can call them.
const GUARD_CALLS = {
  // Ask operators to confirm a command (emil.trust.authority.Confirmations): the bot keeps its
  // own record of the question, which a confirmed command must match (emil_trust.js).
  async ask_confirm (ctl, args) {
    const bot = ctl.bot
    const to = trust.askConfirm(ctl, args).filter((n) => bot.players[n])
    const text = `to run "${String(args.command).slice(0, 150)}" reply: confirm ${args.code} (within ${Math.round(args.ttl_s || 60)} s)`
    for (const name of to) {
      trust.checkChat(ctl, text, {})
      bot.whisper(name, text)
    }
    return { asked: to, code: String(args.code) }
  },

  // What an attack target names (the Python guard asks before it decides; the attack checks again).
  async classify_target (ctl, { target }) {
    return trust.classifyTarget(ctl.bot, target)
  },

  find_chest: findChest
}

module.exports = { ACTIONS, GUARD_CALLS, CHAT_LIMIT }
