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
}).on('close', () => { try { bot.quit() } catch (e) { } setTimeout(() => process.exit(0), 200) })
