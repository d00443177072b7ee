'use strict'
// Game events -> compact JSON through ctl.emit(kind, fields). Field names match emil/world/events.py.
// Also keeps the little state the reflexes share: who swung at Emil last (flying-squid, like
// vanilla, does not tell the victim who hit it, so the attacker is the entity that swung within
// reach just before the health drop).

const HOSTILE_RADIUS = 16
const HOSTILE_REPEAT_MS = 15000
const SWING_WINDOW_MS = 1200
const ATTACK_REACH = 6
// A toss spawns the item entity at the thrower's feet (the server never says who threw it), so
// an item that appears this close to a player, and that Emil then picks up, came from them.
const TOSS_RADIUS = 2.5
const GIFT_WINDOW_MS = 3000
// A chest appearing this close to a player who just swung was placed by them.
const PLACE_REACH = 6
const PLACE_SETTLE_MS = 400
const CHESTS = ['chest', 'trapped_chest']
const trust = require('./emil_trust')

function phaseOf (timeOfDay) {
  if (timeOfDay < 12000) return 'day'
  if (timeOfDay < 13000) return 'dusk'
  if (timeOfDay < 23000) return 'night'
  return 'dawn'
}

function itemTotals (bot) {
  const totals = {}
  for (const item of bot.inventory.items()) totals[item.name] = (totals[item.name] || 0) + item.count
  return totals
}

function installEvents (ctl, bot) {
  // A bot replaced by a new login (its quit ends it a moment later) speaks no more: its late
  // 'end' would otherwise read as the new connection dropping, and start another login.
  const emit = (kind, fields) => { if (ctl.bot === bot) ctl.emit(kind, fields) }
  const swings = new Map() // entity id -> ms of last arm swing
  // this login's hooks only (installReflexes adds its own next): a reconnect's new bot must not
  // run the reflexes of the bot it replaced
  ctl.hooks = { damage: [], health: [], jobStart: [] }
  let spawnedAt = 0
  let lastHealth = null
  let lastFood = null
  let dead = false
  let phase = null
  let totals = null
  let totalsTimer = null
  const hostileSeen = new Map()

  ctl.findAttacker = () => {
    if (!bot.entity) return null
    const now = Date.now()
    let best = null
    for (const e of Object.values(bot.entities)) {
      if (e === bot.entity || !e.position) continue
      const d = e.position.distanceTo(bot.entity.position)
      if (d > ATTACK_REACH) continue
      const swung = now - (swings.get(e.id) || 0) <= SWING_WINDOW_MS
      const hostile = e.type === 'hostile'
      if (!swung && !hostile) continue
      const score = (swung ? 0 : 100) + d
      if (!best || score < best.score) best = { entity: e, score }
    }
    return best ? best.entity : null
  }

  bot.once('spawn', () => {
    spawnedAt = Date.now()
    lastHealth = bot.health
    lastFood = bot.food
    phase = bot.time ? phaseOf(bot.time.timeOfDay) : null
    totals = itemTotals(bot)
  })

  bot.on('spawn', () => {
    if (dead) {
      dead = false
      lastHealth = bot.health
      emit('respawn', { position: here(bot) })
    }
  })

  bot.on('chat', (username, message) => {
    if (username === bot.username) return
    trust.heard(ctl, username, message)
    emit('chat', { sender: username, text: message, whisper: false })
  })
  bot.on('whisper', (username, message) => {
    if (username === bot.username) return
    trust.heard(ctl, username, message)
    emit('chat', { sender: username, text: message, whisper: true })
  })

  // Chests appearing and going (emil/trust/ledger.py: a chest belongs to who placed it, as Emil
  // saw): the placer is Emil when it was placing there, else the player who swung an arm within
  // reach of the spot just before; nobody when no one did (an unknown chest).
  bot.on('blockUpdate', (before, after) => {
    if (!after) return
    const was = before && CHESTS.includes(before.name)
    const is = CHESTS.includes(after.name)
    if (is === was) return
    const at = { x: after.position.x, y: after.position.y, z: after.position.z }
    if (!is) return emit('block_removed', { block: before.name, position: at })
    const mine = ctl.placing
    if (mine && Date.now() < mine.until && mine.x === at.x && mine.y === at.y && mine.z === at.z) {
      return emit('block_placed', { block: after.name, position: at, by: bot.username })
    }
    // the placer's swing and the block can reach this client in either order: look a moment later
    const seenAt = Date.now()
    const spot = after.position.clone()
    setTimeout(() => emit('block_placed', { block: after.name, position: at, by: placerOf(spot, seenAt) }), PLACE_SETTLE_MS)
  })
  const placerOf = (spot, seenAt) => {
    let best = null
    for (const p of Object.values(bot.players)) {
      const e = p.entity
      if (!e || e === bot.entity || !e.position) continue
      const d = e.position.distanceTo(spot.offset(0.5, 0.5, 0.5))
      if (d > PLACE_REACH || Math.abs(seenAt - (swings.get(e.id) || 0)) > SWING_WINDOW_MS) continue
      if (!best || d < best.d) best = { name: p.username, d }
    }
    return best ? best.name : null
  }

  bot.on('entitySwingArm', (entity) => { swings.set(entity.id, Date.now()) })
  // forget what left (killed mobs, despawns): a long session sees thousands of entity ids
  bot.on('entityGone', (entity) => { swings.delete(entity.id); hostileSeen.delete(entity.id) })
  // damage_event (1.19.4+) names the source; it arrives just before the health drop.
  bot.on('entityHurt', (entity, source) => {
    if (entity === bot.entity && source) ctl.hurtBy = { entity: source, at: Date.now() }
  })

  bot.on('health', () => {
    const health = bot.health
    const food = bot.food
    if (lastHealth !== null && health < lastHealth && !dead) {
      const named = ctl.hurtBy && Date.now() - ctl.hurtBy.at < 1000 ? ctl.hurtBy.entity : null
      const attacker = named || ctl.findAttacker()
      ctl.hurtBy = null
      const name = attacker ? (attacker.username || attacker.name || null) : null
      ctl.lastDamage = { at: Date.now(), attacker, amount: lastHealth - health }
      emit('damage', { amount: round(lastHealth - health), health: round(health), attacker: name, attacker_player: !!(attacker && attacker.type === 'player') })
      for (const hook of ctl.hooks.damage) safe(() => hook(attacker, lastHealth - health))
    } else if (health !== lastHealth || food !== lastFood) {
      emit('health', { health: round(health), food: round(food) })
    }
    lastHealth = health
    lastFood = food
    for (const hook of ctl.hooks.health) safe(() => hook())
  })

  bot.on('death', () => {
    dead = true
    emit('death', { reason: ctl.lastDamage && ctl.lastDamage.attacker ? `killed by ${ctl.lastDamage.attacker.username || ctl.lastDamage.attacker.name}` : null, position: here(bot) })
  })

  bot.on('playerJoined', (player) => {
    if (player.username === bot.username || !spawnedAt || Date.now() - spawnedAt < 1500) return
    emit('player_joined', { username: player.username })
  })
  bot.on('playerLeft', (player) => {
    if (player.username === bot.username) return
    emit('player_left', { username: player.username })
  })

  // Who tossed the items Emil picks up (see TOSS_RADIUS): item entity id -> player name.
  const thrownBy = new Map()
  let giftFrom = null
  bot.on('entitySpawn', (e) => {
    if (!e || e.name !== 'item' || !e.position) return
    let best = null
    for (const p of Object.values(bot.players)) {
      const pe = p.entity
      if (!pe || pe === bot.entity || !pe.position) continue
      const d = pe.position.distanceTo(e.position)
      if (d <= TOSS_RADIUS && (!best || d < best.d)) best = { player: p.username, d }
    }
    if (!best) return
    thrownBy.set(e.id, best.player)
    if (thrownBy.size > 200) thrownBy.delete(thrownBy.keys().next().value)
  })
  bot.on('playerCollect', (collector, collected) => {
    if (collector !== bot.entity || !collected || !thrownBy.has(collected.id)) return
    giftFrom = { player: thrownBy.get(collected.id), at: Date.now() }
    thrownBy.delete(collected.id)
  })

  // Items entering the inventory, from any cause (pick-up, /give, crafting): diff the totals,
  // coalesced over 150 ms so one pick-up of a stack is one event.
  const onSlot = () => {
    if (totals === null || totalsTimer) return
    totalsTimer = setTimeout(() => {
      totalsTimer = null
      const now = itemTotals(bot)
      const from = giftFrom && Date.now() - giftFrom.at < GIFT_WINDOW_MS ? giftFrom.player : null
      for (const [name, count] of Object.entries(now)) {
        const delta = count - (totals[name] || 0)
        if (delta > 0) emit('item_collected', from ? { item: name, count: delta, from_player: from } : { item: name, count: delta })
      }
      totals = now
    }, 150)
  }
  bot.once('spawn', () => bot.inventory.on('updateSlot', onSlot))

  let tick = 0
  bot.on('physicsTick', () => {
    if (++tick % 10 !== 0 || !bot.entity) return
    const now = Date.now()
    for (const e of Object.values(bot.entities)) {
      if (e.type !== 'hostile' || !e.position) continue
      const d = e.position.distanceTo(bot.entity.position)
      if (d > HOSTILE_RADIUS) continue
      if (now - (hostileSeen.get(e.id) || 0) < HOSTILE_REPEAT_MS) continue
      hostileSeen.set(e.id, now)
      emit('hostile_nearby', { name: e.name || 'unknown', distance: round(d) })
    }
  })

  bot.on('time', () => {
    if (!bot.time) return
    const p = phaseOf(bot.time.timeOfDay)
    if (phase !== null && p !== phase) emit('time', { phase: p, time_of_day: bot.time.timeOfDay })
    phase = p
  })
  bot.on('rain', () => emit('weather', { raining: !!bot.isRaining }))

  bot.on('kicked', (reason) => emit('kicked', { reason: reasonText(reason) }))
  bot.on('end', (reason) => {
    if (ctl.bot !== bot) return
    ctl.connected = false
    emit('disconnected', { reason: String(reason || 'connection ended') })
  })
  bot.on('error', (err) => emit('error', { message: String((err && err.message) || err) }))
}

function round (x) { return Math.round(x * 100) / 100 }
function here (bot) {
  const p = bot.entity && bot.entity.position
  return p ? { x: round(p.x), y: round(p.y), z: round(p.z) } : null
}
function safe (fn) { try { fn() } catch (err) { /* a reflex failing must not stop events */ } }

// A kick or disconnect reason (chat component JSON or text) as plain text.
function reasonText (reason) {
  if (typeof reason === 'string') {
    try { return flatten(JSON.parse(reason)) } catch (e) { return reason }
  }
  return flatten(reason)
}

function flatten (c) {
  if (c == null) return ''
  if (typeof c === 'string') return c
  if (Array.isArray(c)) return c.map(flatten).join('')
  if (typeof c === 'object') {
    let s = ''
    if (c.text !== undefined) s += flatten(c.text)
    if (c.translate !== undefined) s += c.translate + (c.with ? ' ' + c.with.map(flatten).join(' ') : '')
    if (c.extra) s += flatten(c.extra)
    if (c.value !== undefined && typeof c.value !== 'object') s += String(c.value)
    else if (c.value !== undefined) s += flatten(c.value)
    return s || JSON.stringify(c)
  }
  return String(c)
}

module.exports = { installEvents, phaseOf, reasonText }
