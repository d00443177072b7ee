'use strict'
// sleep: the JS half of the Sleep tool (emil/world/making.py). Checks what vanilla checks before
// walking anywhere (night or a thunderstorm, a bed within 32 blocks or one in the inventory to
// place, no monster within 8 blocks of it, not taken), lies down with mineflayer's own bot.sleep,
// then waits up to `wait_s` for the morning: the night passes once every player sleeps. Still
// asleep then, it says so and leaves Emil in bed; the next long job (or stop) gets Emil up. Woken,
// it reports the clock as it was at the wake, and whether that was still night.
const { abortable, blockPos, countOf, goto, free, solid, placeAt, nearbyLoaded, sleep: pause } = require('./emil_act_common')

const SEARCH_RADIUS = 32
const COLORS = ['white', 'orange', 'magenta', 'light_blue', 'yellow', 'lime', 'pink', 'gray', 'light_gray', 'cyan', 'purple', 'blue', 'brown', 'green', 'red', 'black']
const BEDS = COLORS.map((c) => `${c}_bed`)
// mineflayer's bot.sleep accepts these times of day (vanilla's night, clear weather)
const NIGHT_FROM = 12541
const NIGHT_TO = 23458

function night (bot) {
  const thunder = bot.isRaining && bot.thunderState > 0
  const t = bot.time.timeOfDay
  return thunder || (t >= NIGHT_FROM && t <= NIGHT_TO)
}

// A hostile mob within vanilla's reach of the bed: 8 blocks across, 5 up or down.
function monsterNear (bot, at) {
  return Object.values(bot.entities).find((e) => e.type === 'hostile' && e.position &&
    Math.abs(e.position.x - (at.x + 0.5)) <= 8 && Math.abs(e.position.y - at.y) <= 5 && Math.abs(e.position.z - (at.z + 0.5)) <= 8)
}

// Place a bed from the inventory two blocks out along an axis, its head one further: placing
// looks from here to there, and the server turns the bed the way the placer looks.
async function placeBed (ctl, signal) {
  const bot = ctl.bot
  const item = BEDS.find((b) => countOf(bot, b) > 0)
  if (!item) return null
  const feet = bot.entity.position.floored()
  for (const [dx, dz] of [[1, 0], [-1, 0], [0, 1], [0, -1]]) {
    const foot = feet.offset(2 * dx, 0, 2 * dz)
    const head = feet.offset(3 * dx, 0, 3 * dz)
    if (![foot, head].every((p) => free(bot.blockAt(p)) && solid(bot.blockAt(p.offset(0, -1, 0))))) continue
    if (!free(bot.blockAt(feet.offset(dx, 0, dz)))) continue
    await bot.lookAt(head.offset(0.5, 0, 0.5), true)
    await bot.waitForTicks(2) // the look goes out with the next physics tick
    await placeAt(ctl, item, foot, signal)
    const placed = bot.blockAt(foot)
    if (placed && placed.name === item) return placed
  }
  throw new Error(`no room to put the ${item} down here (it needs two free blocks in a row on flat ground)`)
}

async function sleepInBed (ctl, { wait_s: waitS }, signal) {
  const bot = ctl.bot
  // the server counts the sleepers on the action bar as soon as Emil lies down
  let sleeping = null
  const onCount = (msg) => { const m = String(msg).match(/(\d+)\/(\d+) players sleeping/); if (m) sleeping = `${m[1]} of ${m[2]}` }
  bot.on('actionBar', onCount)
  try {
    return await lieDownAndWait(ctl, waitS, signal, () => sleeping)
  } finally {
    bot.removeListener('actionBar', onCount)
  }
}

async function lieDownAndWait (ctl, waitS, signal, sleepers) {
  const bot = ctl.bot
  let bed = null
  let placed = false
  if (!bot.isSleeping) {
    if (!night(bot)) throw new Error(`it is day (time ${bot.time.timeOfDay}): beds work only at night (from ${NIGHT_FROM}) or in a thunderstorm`)
    const ids = BEDS.map((b) => bot.registry.blocksByName[b].id)
    await nearbyLoaded(bot, signal, SEARCH_RADIUS)
    const beds = bot.findBlocks({ matching: ids, maxDistance: SEARCH_RADIUS, count: 32 }).map((p) => bot.blockAt(p)).filter(Boolean)
    bed = beds.find((b) => !bot.parseBedMetadata(b).occupied) || null
    if (!bed) {
      bed = await placeBed(ctl, signal)
      if (!bed && beds.length) throw new Error(`every bed within ${SEARCH_RADIUS} blocks is taken, and you carry none`)
      if (!bed) throw new Error(`no bed within ${SEARCH_RADIUS} blocks and none in the inventory (craft one from 3 wool and 3 planks)`)
      placed = true
    }
    const meta = bot.parseBedMetadata(bed)
    const head = meta.part ? bed.position : bed.position.plus(meta.headOffset)
    const monster = bot.game.gameMode === 'creative' ? null : monsterNear(bot, head) // vanilla lets creative players sleep anyway
    if (monster) {
      throw new Error(`cannot sleep with monsters nearby: ${monster.name} ${Math.round(monster.position.distanceTo(head))} blocks from the bed`)
    }
    await goto(ctl, new ctl.lib.goals.GoalNear(head.x, head.y, head.z, 2), signal)
    // the server says why it refuses on the action bar; mineflayer only times out
    let refusal = null
    const onBar = (msg) => { refusal = String(msg) }
    bot.on('actionBar', onBar)
    try {
      await abortable(bot.sleep(bed), signal, () => {})
    } catch (err) {
      if (signal.aborted) throw err
      throw new Error(`could not lie down: ${refusal || err.message}`)
    } finally {
      bot.removeListener('actionBar', onBar)
    }
  }
  // what Emil saw as he woke: the clock then, not later (a wake is the morning only when the
  // clock says so; being hurt or the bed dug wakes a sleeper too)
  const woke = new Promise((resolve) => bot.once('wake', () => resolve({ time: bot.time.timeOfDay, night: night(bot) })))
  const outcome = await abortable(Promise.race([woke, pause((waitS ?? 15) * 1000, signal).then(() => null)]), signal, () => { bot.wake().catch(() => {}) })
  return {
    bed: bed ? { ...blockPos(bed.position), placed } : null,
    woke: outcome !== null,
    time: outcome ? outcome.time : bot.time.timeOfDay,
    night: outcome ? outcome.night : night(bot),
    players_sleeping: sleepers()
  }
}

// A long job started while Emil sleeps gets him up first; this one keeps him in bed.
sleepInBed.inBed = true

module.exports = { sleep: sleepInBed, BEDS }
