'use strict'
// Mobs for flying-squid 1.12, through the server's own entity, movement and damage code.
//
// Why flying-squid's own mobs never reached a client: minecraft-data (>= 1.19-ish) types a
// zombie as 'hostile', not 'mob'. flying-squid's /summon only spawns entities typed 'mob' or
// 'object', so `/summon zombie` silently did nothing, and its spawnMob() reads the name from
// registry.mobs (only the 'mob'-typed few), so spawning a zombie directly threw. Its physics also
// pushes a resting mob up by half its height every tick, and a killed mob was never removed from
// the clients (entity_status 3 but no entity_destroy).
//
// Here: spawnMob() for every living entity type (the spawn packet as before: spawn_entity with
// the registry's type id); /summon <entity> [x y z] from a player or the console; a walking,
// falling, jumping body with block collisions; melee hostiles that target the nearest survival
// player in range, walk toward it and hit it through entity.takeDamage (with vanilla's
// damage_event naming the mob, the arm swing and knockback); player hits do the held weapon's
// vanilla damage; a killed mob drops its loot and is removed for every client after the death
// animation (20 ticks), like vanilla.
//
// Not vanilla: no path finding (a mob walks straight, jumping one-block steps), no natural spawning,
// no burning in daylight, ranged and exploding mobs (skeleton, creeper...) walk but never attack.
const { need } = require('./emil_require')
const { Vec3 } = need('vec3')

// Melee mobs: health, attack damage (normal difficulty), walking speed (blocks/s), follow range.
const MELEE = {
  zombie: { health: 20, damage: 3, speed: 2.3, range: 35 },
  husk: { health: 20, damage: 3, speed: 2.3, range: 35 },
  drowned: { health: 20, damage: 3, speed: 2.3, range: 35 },
  zombie_villager: { health: 20, damage: 3, speed: 2.3, range: 35 },
  spider: { health: 16, damage: 2, speed: 3.0, range: 16 },
  cave_spider: { health: 12, damage: 2, speed: 3.0, range: 16 },
  silverfish: { health: 8, damage: 1, speed: 2.5, range: 16 },
  endermite: { health: 8, damage: 2, speed: 2.5, range: 16 },
  vindicator: { health: 24, damage: 5, speed: 3.5, range: 12 },
  zoglin: { health: 40, damage: 6, speed: 2.5, range: 16 }
}
const HEALTH = { skeleton: 20, stray: 20, creeper: 20, witch: 26, enderman: 40, slime: 16, cow: 10, pig: 10, sheep: 8, chicken: 4 }
const LIVING = new Set(['hostile', 'mob', 'passive', 'animal', 'ambient', 'water_creature', 'living'])

// Vanilla attack damage of the held item (fist: 1).
const WEAPON = {
  wooden_sword: 4, golden_sword: 4, stone_sword: 5, iron_sword: 6, diamond_sword: 7, netherite_sword: 8,
  wooden_axe: 7, golden_axe: 7, stone_axe: 9, iron_axe: 9, diamond_axe: 9, netherite_axe: 10,
  wooden_pickaxe: 2, golden_pickaxe: 2, stone_pickaxe: 3, iron_pickaxe: 4, diamond_pickaxe: 5, netherite_pickaxe: 6,
  wooden_shovel: 2.5, golden_shovel: 2.5, stone_shovel: 3.5, iron_shovel: 4.5, diamond_shovel: 5.5, netherite_shovel: 6.5,
  trident: 9
}

const TICK_S = 0.05
const GRAVITY = 0.08 // blocks/tick², vanilla
const JUMP = 0.42 // blocks/tick, vanilla
const ATTACK_TICKS = 20 // vanilla MeleeAttackGoal cooldown
const DEATH_TICKS = 20 // vanilla removes a dead mob after its death animation
const DESPAWN_DISTANCE = 128

function install (serv, settings, { sendDamageEvent }) {
  const registry = serv.registry
  const maxEntities = settings['max-entities'] || 200
  const mobs = new Set()

  function difficultyDamage (damage) {
    // vanilla Player.hurt scaling by difficulty (peaceful 0, easy 1, normal 2, hard 3)
    if (serv.difficulty === 1) return Math.min(damage / 2 + 1, damage)
    if (serv.difficulty === 3) return damage * 1.5
    return serv.difficulty === 0 ? 0 : damage
  }

  async function solid (world, x, y, z) {
    const type = await world.getBlockType(new Vec3(Math.floor(x), Math.floor(y), Math.floor(z)))
    const block = registry.blocks[type]
    return !!block && block.boundingBox === 'block'
  }

  // Does the mob's box at position p overlap a solid block?
  async function collides (mob, p) {
    const hw = mob.width / 2 - 1e-3
    for (let x = Math.floor(p.x - hw); x <= Math.floor(p.x + hw); x++) {
      for (let y = Math.floor(p.y + 1e-3); y <= Math.floor(p.y + mob.height - 1e-3); y++) {
        for (let z = Math.floor(p.z - hw); z <= Math.floor(p.z + hw); z++) {
          if (await solid(mob.world, x, y, z)) return true
        }
      }
    }
    return false
  }

  function pickTarget (mob, range) {
    let best = null
    for (const p of serv.players) {
      if (p.world !== mob.world || p.health <= 0 || !(p.gameMode === 0 || p.gameMode === 2)) continue
      const d = p.position.distanceTo(mob.position)
      if (d <= range && (!best || d < best.d)) best = { p, d }
    }
    return best ? best.p : null
  }

  function faceTowards (mob, at) {
    const dx = at.x - mob.position.x
    const dz = at.z - mob.position.z
    // protocol yaw byte (1/256 turn); vanilla yaw 0 faces +z, 90 faces -x
    const yaw = Math.round(((Math.atan2(-dx, dz) * 180 / Math.PI) / 360) * 256) << 24 >> 24
    if (yaw === mob.yaw) return
    mob.yaw = yaw
    mob._writeOthersNearby('entity_look', { entityId: mob.id, yaw, pitch: 0, onGround: !!mob.onGround })
    mob._writeOthersNearby('entity_head_rotation', { entityId: mob.id, headYaw: yaw })
  }

  function attack (mob, target) {
    mob._writeOthersNearby('animation', { entityId: mob.id, animation: 0 })
    sendDamageEvent(serv, target, mob)
    const push = target.position.minus(mob.position)
    push.y = 0
    const len = push.norm() || 1
    const velocity = push.scaled(8 / len).offset(0, 4, 0)
    target.takeDamage({ damage: difficultyDamage(mob.stats.damage), velocity, maxVelocity: new Vec3(8, 4, 8) })
  }

  async function step (mob) {
    if (mob.dead) return
    if (mob.position.y < -128 || !serv.players.some((p) => p.world === mob.world && p.position.distanceTo(mob.position) < DESPAWN_DISTANCE)) {
      remove(mob)
      return
    }
    const stats = mob.stats
    let walk = new Vec3(0, 0, 0)
    if (stats) {
      if (!mob.target || mob.ticks % 10 === 0) mob.target = pickTarget(mob, stats.range)
      const target = mob.target
      if (target && (target.health <= 0 || !serv.players.includes(target))) mob.target = null
      if (mob.target) {
        const to = mob.target.position.minus(mob.position)
        const flat = Math.hypot(to.x, to.z)
        // vanilla reach: (2 * mob width)² + target width, from feet to feet
        const reach = Math.sqrt((2 * mob.width) ** 2 + 0.6)
        if (flat > reach * 0.8) walk = new Vec3(to.x / flat, 0, to.z / flat).scaled(stats.speed * TICK_S)
        faceTowards(mob, mob.target.position)
        if (mob.cooldown > 0) mob.cooldown--
        if (flat <= reach && Math.abs(to.y) < 1.5 && mob.cooldown <= 0) {
          mob.cooldown = ATTACK_TICKS
          attack(mob, mob.target)
        }
      }
    }
    // knockback arrives as entity.velocity in blocks/s (flying-squid's sendVelocity)
    const v = mob.velocity
    const motion = new Vec3(walk.x + v.x * TICK_S, mob.motionY, walk.z + v.z * TICK_S)
    const friction = mob.onGround ? 0.546 : 0.91
    v.x *= friction
    v.z *= friction
    if (v.y > 0) { motion.y += v.y * TICK_S; v.y = 0 }

    let pos = mob.position.clone()
    let blocked = false
    const tryAxis = async (axis, amount) => {
      if (amount === 0) return true
      const next = pos.clone()
      next[axis] += amount
      if (await collides(mob, next)) return false
      pos = next
      return true
    }
    const fell = await tryAxis('y', motion.y)
    const onGround = !fell && motion.y < 0
    if (onGround) {
      // land on the block's top instead of hovering the last step above it
      const top = Math.floor(pos.y + motion.y) + 1
      if (top <= pos.y && !(await collides(mob, new Vec3(pos.x, top, pos.z)))) pos.y = top
    }
    if (!fell) mob.motionY = 0
    if (!(await tryAxis('x', motion.x))) blocked = true
    if (!(await tryAxis('z', motion.z))) blocked = true
    mob.onGround = onGround
    mob.motionY = (mob.motionY - GRAVITY) * 0.98
    if (onGround) mob.motionY = blocked ? JUMP : -GRAVITY
    if (mob.dead) return
    if (!pos.equals(mob.position)) await mob.sendPosition(pos, onGround)
  }

  function remove (mob) {
    if (!mobs.delete(mob)) return
    serv.destroyEntity(mob)
    for (const p of serv.players) p.nearbyEntities = p.nearbyEntities.filter((e) => e !== mob)
  }

  function dropLoot (mob) {
    const loot = registry.entityLoot?.[mob.name]
    if (!loot) return
    for (const drop of loot.drops) {
      if (drop.playerKill && !mob.killedByPlayer) continue
      if (Math.random() >= drop.dropChance) continue
      const item = registry.itemsByName[drop.item]
      if (!item) continue
      const [lo, hi] = drop.stackSizeRange || [1, 1]
      const count = lo + Math.floor(Math.random() * (hi - lo + 1))
      for (let i = 0; i < count; i++) {
        serv.spawnObject(registry.entitiesByName.item.id, mob.world, mob.position.offset(0, 0.5, 0), {
          velocity: new Vec3(Math.random() - 0.5, 2, Math.random() - 0.5),
          itemId: item.id,
          itemCount: 1,
          pickupTime: 500,
          deathTime: 5 * 60 * 1000
        })
      }
    }
  }

  const spawnMob = (type, world, position, { pitch = 0, yaw = 0, headPitch = 0, velocity = new Vec3(0, 0, 0), metadata = [] } = {}) => {
    const data = registry.entities[type]
    if (!data || !LIVING.has(data.type)) throw new Error(`not a living entity type: ${type}`)
    const mob = serv.initEntity('mob', type, world, position.clone())
    mob.uuid = need('uuid-1345').v4()
    mob.name = data.name
    mob.velocity = velocity
    mob.pitch = pitch
    mob.headPitch = headPitch
    mob.yaw = yaw
    mob.data = 0 // spawn_entity's objectData
    mob.width = data.width || 0.6
    mob.height = data.height || 1.8
    // no `size`: flying-squid's own physics skips this entity; step() moves it
    mob.stats = MELEE[data.name] || null
    mob.health = mob.stats ? mob.stats.health : (HEALTH[data.name] || 20)
    mob.metadata = metadata
    mob.motionY = 0
    mob.cooldown = 0
    mob.ticks = 0
    mob.onGround = false
    const takeDamage = mob.takeDamage
    mob.takeDamage = (opts) => {
      if (mob.dead) return
      sendDamageEvent(serv, mob, opts.attacker || null)
      takeDamage(opts)
      if (mob.health > 0) return
      mob.dead = true
      mob.killedByPlayer = !!opts.attacker
      dropLoot(mob)
      setTimeout(() => remove(mob), DEATH_TICKS * 50)
    }
    mobs.add(mob)
    mob.updateAndSpawn()
    return mob
  }

  let ticking = false
  serv.on('tick', () => {
    if (ticking || mobs.size === 0) return
    ticking = true
    Promise.all([...mobs].map((mob) => { mob.ticks++; return step(mob) }))
      .catch((err) => serv.emit('error', err))
      .finally(() => { ticking = false })
  })

  function summon (name, world, at) {
    const data = registry.entitiesByName[String(name).replace(/^minecraft:/, '')]
    if (!data) return `No entity named ${name}`
    if (LIVING.has(data.type)) serv.spawnMob(data.id, world, at)
    else if (data.type === 'object' || data.type === 'other' || data.type === 'projectile') serv.spawnObject(data.id, world, at, {})
    else return `Cannot summon ${name}`
  }

  // Replaces flying-squid's spawnMob and /summon (its plugins load after this one) once every
  // plugin is loaded.
  serv.spawnMob = spawnMob
  serv.once('asap', () => {
    serv.spawnMob = spawnMob
    const UserError = need('flying-squid').UserError
    serv.commands.add({
      base: 'summon',
      info: 'Summon an entity',
      usage: '/summon <entity> [x y z]',
      op: true,
      parse (str) {
        const m = str.match(/^(\S+)(?: (~?-?[\d.]*) (~?-?[\d.]*) (~?-?[\d.]*))?$/)
        return m ? { name: m[1], coords: m[2] === undefined ? null : [m[2], m[3], m[4]] } : false
      },
      action ({ name, coords }, ctx) {
        if (Object.keys(serv.entities).length > maxEntities) throw new UserError('Too many mobs !')
        const origin = ctx.player ? ctx.player.position : null
        if (!origin && !coords) throw new UserError('The console must give a position: /summon <entity> <x> <y> <z>')
        const at = coords ? new Vec3(...coords.map((c, i) => coord(c, origin ? origin.toArray()[i] : 0))) : origin.clone()
        if (at.toArray().some((n) => !Number.isFinite(n))) throw new UserError('Bad position')
        return summon(name, ctx.player ? ctx.player.world : serv.overworld, at)
      }
    })
    // spawn eggs for every living type, not only the few typed 'mob' (after flying-squid's own
    // 'asap' registrations, so these are the ones kept)
    process.nextTick(() => {
      for (const data of registry.entitiesArray) {
        const egg = registry.itemsByName[`${data.name}_spawn_egg`]
        if (!egg || !LIVING.has(data.type)) continue
        serv.onItemPlace(egg.name, ({ player, placedPosition }) => {
          serv.spawnMob(data.id, player.world, placedPosition.offset(0.5, 0, 0.5))
          return { id: -1, data: 0 }
        }, false)
      }
    })
  })
}

function coord (text, origin) {
  if (text.startsWith('~')) return origin + (text.length > 1 ? parseFloat(text.slice(1)) : 0)
  return parseFloat(text)
}

// A player's hit does the held weapon's damage; the attacker rides along for the damage event.
function installPlayer (player, serv) {
  player.on('attack', (data) => {
    const held = player.inventory.slots[36 + player.heldItemSlot]
    const name = held ? serv.registry.items[held.type]?.name : null
    data.damage = (name && WEAPON[name]) || data.damage || 1
    data.attacker = player
  })
}

module.exports = { install, installPlayer, WEAPON }
