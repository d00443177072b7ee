'use strict'
// Beds for flying-squid 1.12, which places a bed item as one half-block and does nothing when a
// player uses it. Here, as vanilla 1.20 does it (BedItem, BedBlock, ServerPlayer.startSleepInBed,
// ServerLevel's sleep status):
//   placing a bed sets both halves, the head one block ahead in the direction the player faces
//   (nothing is placed when that spot is taken); digging either half removes the other;
//   using a bed: occupied -> "This bed is occupied"; more than 3 blocks away (2 up or down) ->
//   "the bed is too far away"; a solid block on the head -> "This bed is obstructed"; otherwise
//   the respawn point is set at the bed, then by day (outside 12542..23459 when clear, 12010..23991
//   in rain, any time in a thunderstorm) -> "You can sleep only at night or during thunderstorms";
//   a monster within 8 blocks (5 up or down) -> "You may not rest now; there are monsters nearby";
//   else the player sleeps: the SLEEPING pose and the bed position in its entity metadata, which
//   is what mineflayer's bot.sleep waits for, and the bed marked occupied;
//   every player in the overworld asleep for 100 ticks -> the clock jumps to the next morning,
//   rain stops, everybody wakes; before that, "n/m players sleeping" on the action bar;
//   waking (leaving the bed, the morning, being hurt, the bed dug): the standing pose and the wake
//   animation (2), to the sleeper and to everybody near, which is mineflayer's 'wake'.
//
// Not vanilla: the sleeper is not moved onto the bed (it stays where it stood); the respawn point
// is the bed's foot itself.
const { need } = require('./emil_require')
const { translated } = require('./emil_squid_text')

const FACINGS = { north: [0, -1], south: [0, 1], west: [-1, 0], east: [1, 0] }
const BY_YAW = ['south', 'west', 'north', 'east'] // vanilla yaw 0 faces +z (south), 90 faces -x
const SKIP_TICKS = 100 // vanilla: every sleeper has slept this long before the night is skipped
const POSE_STANDING = 0
const POSE_SLEEPING = 2
const WAKE_ANIMATION = 2

function isNight (serv) {
  const w = serv.weather || {}
  const t = serv.time % 24000
  if (w.thundering) return true
  return w.raining ? t >= 12010 && t <= 23991 : t >= 12542 && t <= 23459
}

function install (serv) {
  const registry = serv.registry
  const bedBlocks = registry.blocksArray.filter((b) => b.name.endsWith('_bed'))
  const bedIds = new Set(bedBlocks.map((b) => b.id))
  const { Vec3 } = need('vec3')
  const meta = registry.entitiesByName.player?.metadataKeys || []
  const POSE_KEY = meta.indexOf('pose')
  const SLEEPING_POS_KEY = meta.indexOf('sleeping_pos')

  // block state <-> properties, through flying-squid's own state arithmetic
  const stateOf = (block, props) => block.minStateId + serv.setBlockDataProperties(block.defaultState - block.minStateId, block.states, props)
  const facingVec = (facing) => new Vec3(FACINGS[facing][0], 0, FACINGS[facing][1])

  async function readBed (world, position) {
    const block = await world.getBlock(position)
    if (!block || !bedIds.has(block.type)) return null
    const props = block.getProperties()
    const head = props.part === 'head' ? position.clone() : position.plus(facingVec(props.facing))
    const foot = props.part === 'head' ? position.minus(facingVec(props.facing)) : position.clone()
    return { block: registry.blocks[block.type], props, head, foot }
  }

  function actionBar (player, translate, args = []) {
    player._client.write('system_chat', { content: translated(serv, translate, args), isActionBar: true })
  }

  function writeAll (player, name, packet) {
    player._client.write(name, packet)
    player._writeOthersNearby(name, packet)
  }

  function sendPose (player, sleepingAt) {
    if (POSE_KEY < 0 || SLEEPING_POS_KEY < 0) return
    writeAll(player, 'entity_metadata', {
      entityId: player.id,
      metadata: [
        { key: POSE_KEY, type: 'pose', value: sleepingAt ? POSE_SLEEPING : POSE_STANDING },
        { key: SLEEPING_POS_KEY, type: 'optional_block_pos', value: sleepingAt || undefined }
      ]
    })
  }

  // vanilla marks the head, and the foot copies its neighbour's state (BedBlock.updateShape)
  async function setOccupied (world, head, occupied) {
    const bed = await readBed(world, head)
    if (!bed || bed.props.part !== 'head') return
    await serv.setBlock(world, head, stateOf(bed.block, { ...bed.props, occupied }))
    const foot = await readBed(world, bed.foot)
    if (foot && foot.props.part === 'foot') await serv.setBlock(world, bed.foot, stateOf(foot.block, { ...foot.props, occupied }))
  }

  function monsterNear (player, head) {
    const centre = head.offset(0.5, 0, 0.5)
    return Object.values(serv.entities).find((e) => e !== player && !e.dead && e.world === player.world && e.position &&
      registry.entitiesByName[e.name]?.type === 'hostile' &&
      Math.abs(e.position.x - centre.x) <= 8 && Math.abs(e.position.y - centre.y) <= 5 && Math.abs(e.position.z - centre.z) <= 8)
  }

  // vanilla ServerPlayer.bedInRange: within 3 blocks (2 vertically) of either half's bottom centre
  function inReach (player, bed) {
    return [bed.head, bed.foot].some((p) => Math.abs(player.position.x - (p.x + 0.5)) <= 3 &&
      Math.abs(player.position.y - p.y) <= 2 && Math.abs(player.position.z - (p.z + 0.5)) <= 3)
  }

  async function use (player, position) {
    if (player.emilBed || player.health <= 0) return
    const bed = await readBed(player.world, position)
    if (!bed) return
    if (bed.props.occupied || serv.players.some((p) => p.emilBed && p.emilBed.head.equals(bed.head))) return actionBar(player, 'block.minecraft.bed.occupied')
    if (!inReach(player, bed)) return actionBar(player, 'block.minecraft.bed.too_far_away')
    const above = registry.blocks[await player.world.getBlockType(bed.head.offset(0, 1, 0))]
    if (above && above.boundingBox === 'block') return actionBar(player, 'block.minecraft.bed.obstructed')
    const spawn = bed.foot.offset(0.5, 0.5625, 0.5)
    if (!player.spawnPoint || !player.spawnPoint.equals(spawn)) {
      player.spawnPoint = spawn
      player._client.write('system_chat', { content: translated(serv, 'block.minecraft.set_spawn'), isActionBar: false })
    }
    if (!isNight(serv)) return actionBar(player, 'block.minecraft.bed.no_sleep')
    if (player.gameMode !== 1 && monsterNear(player, bed.head)) return actionBar(player, 'block.minecraft.bed.not_safe')
    player.emilBed = { head: bed.head, ticks: 0 }
    await setOccupied(player.world, bed.head, true)
    sendPose(player, bed.head)
    announce(player.world)
  }

  function wake (player) {
    const bed = player.emilBed
    if (!bed) return
    player.emilBed = null
    sendPose(player, null)
    writeAll(player, 'animation', { entityId: player.id, animation: WAKE_ANIMATION })
    setOccupied(player.world, bed.head, false).catch(() => {})
  }

  const overworldPlayers = () => serv.players.filter((p) => p.world === serv.overworld && p.gameMode !== 3)

  // vanilla announceSleepStatus: with more than one player, everybody reads how many sleep
  function announce (world) {
    const players = overworldPlayers()
    const sleeping = players.filter((p) => p.emilBed).length
    if (world !== serv.overworld || players.length < 2 || sleeping === 0) return
    for (const p of players) actionBar(p, 'sleep.players_sleeping', [sleeping, players.length])
  }

  serv.on('tick', () => {
    const sleepers = serv.players.filter((p) => p.emilBed)
    if (!sleepers.length) return
    for (const p of sleepers) p.emilBed.ticks++
    if (!isNight(serv)) { sleepers.forEach(wake); return }
    const players = overworldPlayers()
    if (players.length && players.every((p) => p.emilBed && p.emilBed.ticks >= SKIP_TICKS)) {
      serv.setTime(serv.time - (serv.time % 24000) + 24000)
      if (serv.weather?.raining) serv.setWeather('clear')
      players.forEach(wake)
    }
  })

  serv.once('asap', () => {
    for (const block of bedBlocks) {
      serv.onItemPlace(block.name, async ({ player, placedPosition }) => {
        // the protocol yaw byte (1/256 turn) as vanilla's horizontal facing
        const quarter = Math.floor((((player.yaw || 0) & 255) * 360 / 256) / 90 + 0.5) & 3
        const facing = BY_YAW[quarter]
        const head = placedPosition.plus(facingVec(facing))
        if (head.equals(player.position.floored())) return {}
        const there = registry.blocks[await player.world.getBlockType(head)]
        if (!there || there.boundingBox !== 'empty' || /water|lava/.test(there.name)) return {}
        await serv.setBlock(player.world, head, stateOf(block, { facing, occupied: false, part: 'head' }))
        return { id: block.id, data: stateOf(block, { facing, occupied: false, part: 'foot' }) - block.minStateId }
      })
      serv.onBlockInteraction(block.name, ({ block: clicked, player }) => {
        if (player.crouching) return false
        use(player, clicked.position).catch((err) => serv.emit('error', err))
        return true
      })
    }
  })

  serv.emilBeds = { wake, isBed: (type) => bedIds.has(type), readBed }
}

function installPlayer (player, serv) {
  player._client.on('entity_action', ({ actionId } = {}) => {
    if (actionId === 'stop_sleeping' || actionId === 2) serv.emilBeds?.wake(player)
  })
  player.once('spawned', () => {
    // vanilla LivingEntity.hurt wakes a sleeper
    const takeDamage = player.takeDamage
    if (typeof takeDamage === 'function') {
      player.takeDamage = (opts) => { serv.emilBeds?.wake(player); return takeDamage(opts) }
    }
  })
  player.on('dug', async ({ position, block }) => {
    const beds = serv.emilBeds
    if (!beds || !block || !beds.isBed(block.type)) return
    const props = block.getProperties()
    const [dx, dz] = FACINGS[props.facing]
    const sign = props.part === 'head' ? -1 : 1
    const other = position.offset(dx * sign, 0, dz * sign)
    const head = props.part === 'head' ? position : other
    for (const p of serv.players) if (p.emilBed && p.emilBed.head.equals(head)) beds.wake(p)
    const there = await player.world.getBlock(other)
    if (there && there.type === block.type) await serv.setBlock(player.world, other, 0)
  })
  player._client.on('end', () => { player.emilBed = null })
}

module.exports = { install, installPlayer, isNight }
