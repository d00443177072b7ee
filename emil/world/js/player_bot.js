'use strict'
// A second, plain mineflayer bot that plays "the player" in Emil's integration tests and
// benchmarks: chat partner, attacker, recipient of items. It is a real client on the real
// server (no double). Driven by JSON lines on stdin: {"id", "op", ...args}; answers with
// {"id", "ok", "result"|"error"} on stdout, and pushes {"event": ...} lines for things the
// benchmark times (another entity swinging its arm, chat seen).
// Usage: node player_bot.js '{"host","port","username","version","modulesDir"}'
// It is a human player's client, not Emil: its chat goes out unchecked (tests type /tp, /give)
// and the command rule (emil_chat_rule.js) guards only Emil's own say and whisper.
const readline = require('readline')

const opts = JSON.parse(process.argv[2])
if (opts.modulesDir) process.env.EMIL_JS_MODULES = opts.modulesDir
const { need } = require('./emil_require')
const mineflayer = need('mineflayer')
const { pathfinder, Movements, goals } = need('mineflayer-pathfinder')
const { Vec3 } = need('vec3')

const out = (obj) => process.stdout.write(JSON.stringify(obj) + '\n')
const bot = mineflayer.createBot({ host: opts.host, port: opts.port, username: opts.username, version: opts.version, auth: 'offline', hideErrors: true })
bot.loadPlugin(pathfinder)
bot.once('spawn', () => {
  bot.pathfinder.setMovements(new Movements(bot))
  out({ event: 'spawn', t: Date.now() / 1000 })
})
// the latest state id of the inventory window, for a forged click that is not merely stale
let inventoryStateId = 0
for (const name of ['window_items', 'set_slot']) bot._client.on(name, (p) => { if (p.windowId === 0) inventoryStateId = p.stateId })
bot.on('entitySwingArm', (e) => out({ event: 'swing', name: e.username || e.name, t: Date.now() / 1000 }))
bot.on('messagestr', (msg) => out({ event: 'message', text: msg, t: Date.now() / 1000 }))
bot.on('kicked', (r) => out({ event: 'kicked', reason: String(r) }))
bot.on('end', () => { out({ event: 'end' }); process.exit(0) })
bot.on('error', (e) => out({ event: 'error', message: String(e && e.message) }))

function entityOf (name) {
  const p = bot.players[name]
  if (!p || !p.entity) throw new Error(`cannot see ${name}`)
  return p.entity
}
const v = (p) => ({ x: p.x, y: p.y, z: p.z })

const OPS = {
  chat: async ({ text }) => { bot.chat(text); return true },
  whisper: async ({ to, text }) => { bot.whisper(to, text); return true },
  attack: async ({ name }) => {
    const e = entityOf(name)
    await bot.lookAt(e.position.offset(0, 1.2, 0), true)
    const t = Date.now() / 1000
    bot.attack(e)
    return { t }
  },
  position: async () => v(bot.entity.position),
  entity_position: async ({ name }) => v(entityOf(name).position),
  inventory: async () => {
    const inv = {}
    for (const i of bot.inventory.items()) inv[i.name] = (inv[i.name] || 0) + i.count
    return inv
  },
  block: async ({ x, y, z }) => { const b = bot.blockAt(new Vec3(x, y, z)); return b ? b.name : null },
  goto: async ({ x, y, z, range }) => { await bot.pathfinder.goto(new goals.GoalNear(x, y, z, range ?? 0)); return v(bot.entity.position) },
  walk: async ({ dir, ms }) => {
    bot.setControlState(dir, true)
    await new Promise((resolve) => setTimeout(resolve, ms))
    bot.setControlState(dir, false)
    return v(bot.entity.position)
  },
  // the server's own view of the inventory: a click with an impossible state id makes the
  // server send the whole window back (mineflayer's _syncWindow)
  synced_inventory: async () => {
    await bot._syncWindow(bot.inventory)
    return OPS.inventory()
  },
  // mineflayer's own crafting: recipes from minecraft-data, clicks through the real window
  craft: async ({ item, count, table }) => {
    const id = bot.registry.itemsByName[item]?.id
    if (id === undefined) throw new Error(`no item ${item}`)
    const tableBlock = table ? bot.blockAt(new Vec3(table.x, table.y, table.z)) : null
    if (table && (!tableBlock || tableBlock.name !== 'crafting_table')) throw new Error('no crafting table there')
    const [recipe] = bot.recipesFor(id, null, 1, tableBlock)
    if (!recipe) throw new Error(`no recipe for ${item} with this inventory`)
    const t = Date.now()
    await bot.craft(recipe, count || 1, tableBlock)
    return { elapsed_ms: Date.now() - t, window_open: !!bot.currentWindow }
  },
  // mineflayer's furnace: fuel and input in, wait for the output, take it
  smelt: async ({ x, y, z, input, fuel, count, timeout_ms }) => {
    const furnace = await bot.openFurnace(bot.blockAt(new Vec3(x, y, z)))
    try {
      await furnace.putFuel(bot.registry.itemsByName[fuel].id, null, 1)
      await furnace.putInput(bot.registry.itemsByName[input].id, null, count || 1)
      const seen = { fuel: 0, progress: 0 }
      furnace.on('update', () => {
        seen.fuel = Math.max(seen.fuel, furnace.fuel || 0)
        seen.progress = Math.max(seen.progress, furnace.progress || 0)
      })
      const t = Date.now()
      while (!furnace.outputItem() || furnace.outputItem().count < (count || 1)) {
        if (Date.now() - t > (timeout_ms || 30000)) throw new Error('the furnace produced nothing in time')
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      const elapsed = Date.now() - t
      const out = await furnace.takeOutput()
      return { output: out.name, count: out.count, elapsed_ms: elapsed, total_fuel_ticks: furnace.totalFuel, total_progress_ticks: furnace.totalProgress, ...seen }
    } finally {
      furnace.close()
    }
  },
  // on top of the block below; sneaking, as a player does to put a block on a chest or table
  place: async ({ item, x, y, z, sneak }) => {
    await bot.equip(bot.registry.itemsByName[item].id, 'hand')
    if (sneak) bot.setControlState('sneak', true)
    try {
      await bot.placeBlock(bot.blockAt(new Vec3(x, y - 1, z)), new Vec3(0, 1, 0))
    } finally {
      if (sneak) bot.setControlState('sneak', false)
    }
    return true
  },
  // a hostile client's click: claims an item in the cursor the server never gave it
  forged_click: async ({ item, count }) => {
    bot._client.write('window_click', {
      windowId: 0, stateId: inventoryStateId, slot: 20, mouseButton: 0, mode: 0,
      changedSlots: [{ location: 20, item: { present: true, itemId: bot.registry.itemsByName[item].id, itemCount: count } }],
      cursorItem: { present: true, itemId: bot.registry.itemsByName[item].id, itemCount: count }
    })
    return true
  },
  // mineflayer's own chest API on the server's chest block entity
  chest: async ({ x, y, z, deposit, withdraw }) => {
    const window = await bot.openContainer(bot.blockAt(new Vec3(x, y, z)))
    try {
      for (const [name, count] of Object.entries(deposit || {})) await window.deposit(bot.registry.itemsByName[name].id, null, count)
      for (const [name, count] of Object.entries(withdraw || {})) await window.withdraw(bot.registry.itemsByName[name].id, null, count)
      const contents = {}
      for (const i of window.containerItems()) contents[i.name] = (contents[i.name] || 0) + i.count
      return contents
    } finally {
      window.close()
    }
  },
  // mineflayer's own bed API: the server must send what bot.sleep and the wake event wait for
  sleep: async ({ x, y, z }) => { await bot.sleep(bot.blockAt(new Vec3(x, y, z))); return bot.isSleeping },
  wake: async () => {
    const woke = new Promise((resolve) => bot.once('wake', resolve))
    await bot.wake()
    await woke
    return bot.isSleeping
  },
  sleeping: async () => bot.isSleeping,
  // a bare right click on a block, without mineflayer's own checks (what the server decides)
  use_block: async ({ x, y, z }) => { await bot.activateBlock(bot.blockAt(new Vec3(x, y, z))); return true },
  dig: async ({ x, y, z }) => { await bot.dig(bot.blockAt(new Vec3(x, y, z)), true); return true },
  look: async ({ yaw }) => { await bot.look(yaw, 0, true); return true },
  time: async () => bot.time.timeOfDay,
  entities: async () => Object.values(bot.entities).filter((e) => e !== bot.entity).map((e) => ({ id: e.id, name: e.name, type: e.type, username: e.username || null, ...v(e.position) })),
  debug: async () => ({ players: Object.fromEntries(Object.entries(bot.players).map(([k, p]) => [k, !!p.entity])), entities: Object.values(bot.entities).map((e) => [e.id, e.type, e.name, e.username]) }),
  health: async () => ({ health: bot.health, food: bot.food }),
  quit: async () => { bot.quit(); return true }
}

readline.createInterface({ input: process.stdin }).on('line', async (line) => {
  let msg
  try { msg = JSON.parse(line) } catch (e) { return }
  try {
    const fn = OPS[msg.op]
    if (!fn) throw new Error(`unknown op ${msg.op}`)
    out({ id: msg.id, ok: true, result: await fn(msg) })
  } catch (err) {
    out({ id: msg.id, ok: false, error: String(err && err.message) })
  }
}).on('close', () => { try { bot.quit() } catch { /* the connection may be gone already */ } setTimeout(() => process.exit(0), 200) })
