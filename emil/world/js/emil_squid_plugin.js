'use strict'
// Emil's flying-squid plugin: the few mechanics flying-squid 1.12 lacks and that Emil's tests
// and demo need, done through the server's own code paths (takeDamage, updateFood, inventory
// updates, spawnObject) rather than faked on the client side:
//   /tell <player> <text>     (aliases msg, w) whispers, in vanilla's wording
//   /hurt <player> <amount> [attacker]   damage through entity.takeDamage (the PvP path)
//   /heal <player>            health and food back to 20
//   /food <player> <level>    set the food level (flying-squid has no hunger drain)
//   eating: holding food and using it restores food after 1.6 s and reports entity status 9
//   a joining client is told who is online (flying-squid tells everybody else only)
//   players leaving are announced (player_remove) so other clients see them go
//   dead 1.20.2+ players can respawn (client_command's action arrives as a name)
//   players spawn for other clients as players (flying-squid sends entity type 0 from 1.20.2)
//   hit sounds as well-formed 1.19.3+ packets
//   sneaking (1.19+ names the action), so a sneaking player places against a table or chest
//   moves sent before a teleport's confirmation are ignored, as vanilla does, the chunks around a
//   teleport's destination are sent, and a teleport just after joining is not undone by the login
//   every command a player issues is logged as `EMIL_COMMAND <player> "<command>"` on stdout
// and, one concern per file:
//   emil_squid_mobs.js      mobs that reach clients, chase, hit and die; /summon; weapon damage
//   emil_squid_sky.js       day/night clock and weather as vanilla sends them; /weather, /time
//   emil_squid_windows.js   server-side windows with vanilla's click rules: 2x2 and table crafting,
//                           furnace and chest windows, tossing; /give, /clear
//   emil_recipes.js         minecraft-data recipes as families (tag ingredients) matched against a grid
//   emil_squid_furnace.js   furnace block entities: fuel, cooking per tick, the lit state
//   emil_smelting.js        smelting recipes and fuel burn times
//   emil_squid_chests.js    chest block entities: 27 slots, the lid, dropped when dug
//   emil_squid_blockentities.js  the per-position store of block entities that hold items
//   emil_squid_beds.js      beds: both halves, sleeping at night, skipping the night, waking
const { need } = require('./emil_require')
const { Vec3 } = need('vec3')
const mobs = require('./emil_squid_mobs')
const sky = require('./emil_squid_sky')
const furnace = require('./emil_squid_furnace')
const chests = require('./emil_squid_chests')
const beds = require('./emil_squid_beds')
const windows = require('./emil_squid_windows')

module.exports.server = function (serv, settings) {
  const UserError = need('flying-squid').UserError
  serv.setMaxListeners(30) // flying-squid's plugins and these all wait for 'asap' and 'tick'
  mobs.install(serv, settings, { sendDamageEvent })
  sky.install(serv)
  const furnaces = furnace.install(serv)
  const chestStore = chests.install(serv)
  beds.install(serv)
  serv.emilWindows = windows.install(serv, { furnaces, chests: chestStore })
  serv.once('asap', () => fixSounds(serv))

  function findPlayer (name) {
    const p = serv.getPlayer(name)
    if (!p) throw new UserError(`Player not found: ${name}`)
    return p
  }

  serv.commands.add({
    base: 'tell',
    aliases: ['msg', 'w'],
    info: 'whisper to a player',
    usage: '/tell <player> <text>',
    parse (str) {
      const m = str.match(/^(\S+) (.+)$/)
      return m ? { to: m[1], text: m[2] } : false
    },
    action ({ to, text }, ctx) {
      const target = findPlayer(to)
      const from = ctx.player ? ctx.player.username : 'Server'
      target.system(`${from} whispers to you: ${text}`)
      if (ctx.player) ctx.player.system(`You whisper to ${to}: ${text}`)
    }
  })

  serv.commands.add({
    base: 'hurt',
    info: 'damage a player through the server damage path',
    usage: '/hurt <player> <amount> [attacker]',
    op: true,
    parse (str) {
      const m = str.match(/^(\S+) (\d+(?:\.\d+)?)(?: (\S+))?$/)
      return m ? { name: m[1], amount: parseFloat(m[2]), attacker: m[3] } : false
    },
    action ({ name, amount, attacker }) {
      const target = findPlayer(name)
      let velocity = new Vec3(0, 0, 0)
      let source = null
      if (attacker) {
        source = findPlayer(attacker)
        velocity = target.position.minus(source.position).plus(new Vec3(0, 0.5, 0)).scaled(2)
      }
      module.exports.sendDamageEvent(serv, target, source)
      target.takeDamage({ damage: amount, velocity })
    }
  })

  serv.commands.add({
    base: 'heal',
    info: 'restore health and food of a player',
    usage: '/heal <player>',
    op: true,
    parse (str) { return str.match(/^\S+$/) ? str : false },
    action (name) {
      const p = findPlayer(name)
      p.updateHealth(20)
      p.updateFood(20)
    }
  })

  serv.commands.add({
    base: 'food',
    info: 'set the food level of a player',
    usage: '/food <player> <level>',
    op: true,
    parse (str) {
      const m = str.match(/^(\S+) (\d+)$/)
      return m ? { name: m[1], level: Math.max(0, Math.min(20, parseInt(m[2]))) } : false
    },
    action ({ name, level }) {
      findPlayer(name).updateFood(level)
    }
  })
}

module.exports.player = function (player, serv) {
  const registry = serv.registry
  mobs.installPlayer(player, serv)
  sky.installPlayer(player, serv)
  beds.installPlayer(player, serv)
  // after flying-squid's own player plugins (inventory.js loads after this one)
  player.once('asap', () => {
    awaitTeleports(player)
    windows.installPlayer(player, serv, serv.emilWindows)
    if (serv.emilWindows) furnace.installPlayer(player, serv.emilWindows.furnaces)
    if (serv.emilWindows) chests.installPlayer(player, serv.emilWindows.chests)
  })
  // flying-squid creates players with entityType null; from 1.20.2 players spawn through
  // spawn_entity, where type 0 makes every other client see an allay instead of a player.
  if (player.entityType == null && registry.entitiesByName.player) player.entityType = registry.entitiesByName.player.id

  // flying-squid 1.12 sends the player list to everybody except the newcomer, so a client
  // joining later never learns who is online (mineflayer's bot.players stays empty) and cannot
  // name the player entities it sees. Send it the list, then re-spawn the others so it can
  // match entities to names.
  player.once('spawned', () => {
    if (!serv.supportFeature('playerInfoActionIsBitfield')) return
    player._client.write('player_info', {
      action: { add_player: true },
      data: serv.players.map((p) => ({ uuid: p.uuid, player: { name: p.username, properties: p.profileProperties } }))
    })
    const others = player.nearbyEntities.filter((e) => e.type === 'player')
    player.despawnEntities(others)
    others.forEach((e) => player.spawnEntity(e))
  })

  // From 1.19.3 a player leaving is announced with player_remove; flying-squid sends an
  // old-style player_info that clients ignore, so nobody learns the player left.
  player.once('disconnected', () => {
    if (!serv.supportFeature('playerInfoActionIsBitfield')) return
    for (const other of serv.players) {
      if (other !== player) other._client.write('player_remove', { players: [player.uuid] })
    }
  })

  // From 1.20.2 the protocol maps client_command's action 0 to the name 'perform_respawn', which
  // flying-squid does not recognise, so a dead player was never respawned.
  player._client.on('client_command', (data) => {
    if (!data || data.actionId !== 'perform_respawn' || player.health > 0) return
    player.behavior('requestRespawn', {}, () => {
      // flying-squid's own respawn packet sends a numeric dimension, which 1.20.2+ cannot encode
      const dimension = serv.registry.loginPacket?.worldType || 'minecraft:overworld'
      player._client.write('respawn', {
        dimension,
        worldName: serv.dimensionNames[0] || 'minecraft:overworld',
        hashedSeed: serv.hashedSeed ?? [0, 0],
        gamemode: player.gameMode,
        previousGamemode: 255,
        isDebug: false,
        isFlat: true,
        portalCooldown: 0,
        copyMetadata: false
      })
      player.sendSelfPosition()
      player.updateHealth(20)
      player.nearbyEntities = []
      player.updateAndSpawn()
    })
  })

  // From 1.19 (or so) entity_action's action arrives as a name ('start_sneaking'), which
  // flying-squid compares with numbers, so a sneaking player was never crouching and could not
  // place a block against a crafting table, chest or bed without opening it.
  player._client.on('entity_action', ({ actionId } = {}) => {
    if (actionId === 'start_sneaking') player.crouching = true
    else if (actionId === 'stop_sneaking') player.crouching = false
  })

  // Eating: vanilla finishes a food item 32 ticks after the use starts.
  let eating = null
  player._client.on('use_item', () => {
    const slot = 36 + player.heldItemSlot
    const held = player.inventory.slots[slot]
    if (!held) return
    const food = registry.foodsByName?.[registry.items[held.type]?.name]
    if (!food || eating) return
    eating = setTimeout(() => {
      eating = null
      const now = player.inventory.slots[slot]
      if (!now || now.type !== held.type) return
      player.updateFood(Math.min(20, player.food + food.foodPoints))
      player.updateFoodSaturation(Math.min(player.food, (player.foodSaturation || 0) + food.saturation))
      now.count -= 1
      player.inventory.updateSlot(slot, now.count > 0 ? now : null)
      player._client.write('entity_status', { entityId: player.id, entityStatus: 9 })
    }, 1600)
  })
  player._client.on('end', () => { if (eating) clearTimeout(eating) })

  // Tell the victim (and onlookers) who hit it, as vanilla does with damage_event, before
  // flying-squid's own handler sends the health drop. Source ids are entity id + 1 (0 = none);
  // the damage type index is left at 0 (mineflayer reads only the source).
  player._client.prependListener('use_entity', ({ target, mouse } = {}) => {
    if (mouse !== 1) return
    const victim = serv.entities[target]
    if (victim && victim.type === 'player' && victim.gameMode === 0) sendDamageEvent(serv, victim, player)
  })

  // Every command a player issues is logged on stdout, which EmbeddedServer keeps in log_lines:
  // the command-authority test reads it to show that a hostile player's tricks ran nothing.
  player.on('command', ({ command } = {}) => {
    process.stdout.write(`EMIL_COMMAND ${player.username} ${JSON.stringify(String(command))}\n`)
  })
}

// Teleports. Vanilla ignores a client's moves between a teleport and its teleport_confirm: they
// were sent from where it stood before. flying-squid took them, so right after a /tp the server put the
// player back where it came from while the client stood at the destination, and sent its chunks
// around the wrong spot (a teleported bot saw no blocks at all). Moves are taken again once the
// client confirms, or after 5 s from a client that never does.
const TELEPORT_PATIENCE_MS = 5000
function awaitTeleports (player) {
  const client = player._client
  let awaitingSince = 0
  const awaiting = () => awaitingSince && Date.now() - awaitingSince < TELEPORT_PATIENCE_MS
  // flying-squid's login ends by sending the login position again, seconds after the spawn: a
  // teleport in between (a test's /tp right after joining) was undone by it
  let spawned = false
  let loginResend = true
  let teleported = false
  player.once('spawned', () => { spawned = true })
  const teleport = player.teleport
  player.teleport = (...args) => { if (spawned) teleported = true; return teleport(...args) }
  const sendSelfPosition = player.sendSelfPosition
  player.sendSelfPosition = (position) => {
    if (position && spawned && loginResend) {
      loginResend = false
      if (teleported) position = undefined
    }
    awaitingSince = Date.now()
    return sendSelfPosition(position)
  }
  const [onPosition] = client.listeners('position')
  const [onPositionLook] = client.listeners('position_look')
  if (!onPosition || !onPositionLook) return
  client.removeListener('position', onPosition)
  client.removeListener('position_look', onPositionLook)
  client.on('position', (packet) => { if (!awaiting()) onPosition(packet) })
  client.on('position_look', (packet) => { if (!awaiting()) onPositionLook(packet) })
  client.on('teleport_confirm', () => {
    awaitingSince = 0
    // a teleport far from where the chunks were last sent: send the ones around the destination
    // (flying-squid only does it on a move, and skips it while still sending the last batch)
    const last = player.lastPositionChunkUpdated
    if (last && player.position.distanceTo(last) > 16) player.emit('playerChangeRenderDistance', player.view, true)
  })
}

// From 1.19.3 flying-squid's sound_effect packet is malformed (every client logged a partial
// packet on each hit) and names pre-1.13 sounds: send the registry's sound id, fixed-point
// position (1/8 block) and a plain pitch, as vanilla does; a sound the version lacks is not sent.
const LEGACY_SOUNDS = { 'game.player.hurt': 'entity.player.hurt', 'random.pop': 'entity.item.pickup' }
function fixSounds (serv) {
  if (!serv.supportFeature('removedNamedSoundEffectPacket')) return
  serv.playSound = (sound, world, position, { whitelist, blacklist = [], radius = 32, volume = 1.0, pitch = 1.0, soundCategory = 0 } = {}) => {
    const known = serv.registry.soundsByName?.[LEGACY_SOUNDS[sound] || sound]
    if (!known) return
    const players = whitelist !== undefined ? [].concat(whitelist) : serv.getNearby({ world, position, radius })
    for (const player of players) {
      if (blacklist.includes(player)) continue
      const at = position || player.position
      player._client.write('sound_effect', {
        sound: { soundId: known.id },
        soundCategory,
        x: Math.floor(at.x * 8),
        y: Math.floor(at.y * 8),
        z: Math.floor(at.z * 8),
        volume,
        pitch,
        seed: [0, 0]
      })
    }
  }
}

function sendDamageEvent (serv, victim, source) {
  if (!serv.supportFeature('damageEventPacket') && !serv.registry.version['>=']('1.19.4')) return
  const packet = { entityId: victim.id, sourceTypeId: 0, sourceCauseId: source ? source.id + 1 : 0, sourceDirectId: source ? source.id + 1 : 0 }
  if (victim._client) victim._client.write('damage_event', packet)
  victim._writeOthersNearby('damage_event', packet)
}
module.exports.sendDamageEvent = sendDamageEvent
