'use strict'
// Emil's bot module: owns the mineflayer bot, its plugins, the reflexes and the coarse actions.
//
// Python (emil/world/bridge.py) talks to this module through JSPyBridge with a handful of coarse
// calls: createController(options) once, then controller.connect(), start(id, name, argsJson, job),
// abort(), snapshot(), setReflexes(json), quit(). Every game event leaves through ONE emitter
// event, controller.events.emit('event', '<compact json>'), whose fields match emil/world/events.py.
// Python never walks JS objects: everything crossing the bridge is a JSON string or a number.
const { need } = require('./emil_require')
// This Node process shares the Python process's stdout (JSPyBridge passes it through), which
// carries Emil's own output (--json reports). Library chatter goes to stderr instead, where the
// bridge hands each line to Emil's log (emil/world/_jsruntime.py).
console.log = console.info = console.debug = (...args) => console.error(...args)
const { EventEmitter } = require('events')
const { installEvents, reasonText } = require('./emil_events')
const { installReflexes, DEFAULT_REFLEXES } = require('./emil_reflexes')
const { ACTIONS, GUARD_CALLS } = require('./emil_actions')
const { snapshot } = require('./emil_snapshot')

// The versions Emil can play: those mineflayer is tested with, and any version that speaks the
// same protocol as one of them (minecraft-data knows which do).
function supportedVersions () {
  return need('mineflayer').testedVersions
}

function protocolOf (version) {
  const data = need('minecraft-data')(version)
  return data ? data.version.version : undefined
}

// -> { ok: true, version, server } or { ok: false, code: 'version', error }
function resolveVersion (wanted, server) {
  const mcData = need('minecraft-data')
  const supported = supportedVersions()
  const list = `mineflayer ${need('mineflayer/package.json').version} supports ${supported.join(', ')}`
  const serverText = server.name !== undefined ? `${server.name} (protocol ${server.protocol})` : 'an unknown version'
  const auto = !wanted || wanted === 'auto'
  if (!auto) {
    const protocol = protocolOf(wanted)
    if (protocol === undefined) return { ok: false, code: 'version', error: `unknown Minecraft version ${wanted}; ${list}` }
    if (server.protocol !== undefined && server.protocol !== protocol) {
      return { ok: false, code: 'version', error: `the server runs ${serverText} but mc_version is ${wanted} (protocol ${protocol}); leave mc_version on auto or set it to the server's version` }
    }
    if (!supported.some((v) => protocolOf(v) === protocol)) {
      return { ok: false, code: 'version', error: `Minecraft ${wanted} is not supported: ${list}` }
    }
    return { ok: true, version: wanted, server: serverText }
  }
  if (server.protocol === undefined) {
    return { ok: false, code: 'version', error: `the server's status ping names no protocol version; set mc_version to the server's version (${list})` }
  }
  // Versions sharing the server's protocol, a tested one first (1.20.3 and 1.20.4 are one protocol).
  const candidates = (mcData.postNettyVersionsByProtocolVersion.pc[server.protocol] || []).map((v) => v.minecraftVersion)
  const version = candidates.find((v) => supported.includes(v)) || supported.find((s) => protocolOf(s) === server.protocol)
  if (!version) {
    return { ok: false, code: 'version', error: `the server runs ${serverText}, which Emil cannot play (${list}); run the server on one of those` }
  }
  return { ok: true, version, server: serverText }
}

function createController (optionsJson) {
  const options = JSON.parse(optionsJson)
  if (options.modulesDir) process.env.EMIL_JS_MODULES = options.modulesDir
  const mineflayer = need('mineflayer')
  const { pathfinder, Movements, goals } = need('mineflayer-pathfinder')
  const pvp = need('mineflayer-pvp').plugin
  const tool = need('mineflayer-tool').plugin
  const Vec3 = need('vec3').Vec3

  const events = new EventEmitter()
  const ctl = {
    events,
    bot: null,
    lib: { goals, Movements, Vec3 },
    options,
    reflexes: { ...DEFAULT_REFLEXES, ...(options.reflexes || {}) },
    job: null, // { name, controller: AbortController }
    connected: false
  }

  ctl.emit = (kind, fields) => {
    try {
      events.emit('event', JSON.stringify({ kind, t: Date.now() / 1000, ...fields }))
    } catch (err) {
      // a handler on the Python side failed; never let that break the game loop
    }
  }

  // Resolves on spawn; rejects with {code, message} on anything that prevents it.
  // Like start(): returns at once, the outcome arrives as {kind: '_connected', id, ok, ...}.
  ctl.startConnect = (id) => {
    // A bug here must come back as an answer: an unhandled rejection would kill this process.
    ctl.connect().catch((err) => JSON.stringify({ ok: false, code: 'error', error: `bot module: ${(err && err.stack) || err}` })).then((res) => {
      try { events.emit('event', JSON.stringify({ kind: '_connected', id, ...JSON.parse(res) })) } catch (e) { /* Python gone */ }
    })
    return true
  }

  // Ask the server what it is before logging in. Its status ping names its version (and
  // protocol): with version 'auto' that is the version the bot speaks; a pinned version must
  // agree with it. Either way the version must be one mineflayer is tested with (or shares a
  // protocol with one), else it is a configuration error listing the supported versions;
  // flying-squid would otherwise just leave a wrong client hanging.
  ctl.probe = async () => {
    let info
    try {
      info = await need('minecraft-protocol').ping({ host: options.host, port: options.port, closeTimeout: 5000, noPongTimeout: 5000 })
    } catch (err) {
      return { ok: false, code: (err && err.code) || 'ping', error: String((err && err.message) || err) }
    }
    const server = (info && info.version) || {}
    const resolved = resolveVersion(options.version, server)
    if (resolved.ok) ctl.version = resolved.version
    if (resolved.ok) ctl.serverVersion = resolved.server
    return resolved
  }

  ctl.connect = async () => {
    const probe = await ctl.probe()
    if (!probe.ok) return JSON.stringify(probe)
    return ctl.login()
  }

  ctl.login = () => new Promise((resolve) => {
    if (ctl.bot) { try { ctl.bot.quit() } catch (e) { /* already gone */ } }
    let settled = false
    const done = (value) => { if (!settled) { settled = true; resolve(JSON.stringify(value)) } }
    let bot
    try {
      bot = mineflayer.createBot({
        host: options.host,
        port: options.port,
        username: options.username,
        version: ctl.version,
        auth: 'offline',
        hideErrors: true,
        checkTimeoutInterval: options.checkTimeoutMs || 30000,
        respawn: true
      })
    } catch (err) {
      done({ ok: false, code: 'config', error: String(err && err.message) })
      return
    }
    ctl.bot = bot
    bot.loadPlugin(pathfinder)
    bot.loadPlugin(pvp)
    bot.loadPlugin(tool)
    const timer = setTimeout(() => done({ ok: false, code: 'timeout', error: `no spawn within ${options.spawnTimeoutMs || 20000} ms` }), options.spawnTimeoutMs || 20000)
    bot.once('spawn', () => {
      clearTimeout(timer)
      const movements = new Movements(bot)
      movements.canDig = true
      movements.allowParkour = false
      movements.allow1by1towers = true
      bot.pathfinder.setMovements(movements)
      bot.pathfinder.thinkTimeout = 3000
      // mineflayer-pvp: chase with Emil's own movements (its default set them back to its own,
      // parkour included, for every later walk), and close in to 1 block: its follow goal counts
      // whole blocks from where the target stood when the path was planned, so at the default
      // 2 a knocked-back target stays 4.3 blocks off, out of the 3.5-block reach, and the fight
      // stalls after one hit (measured on the embedded server)
      bot.pvp.movements = movements
      bot.pvp.followRange = 1
      ctl.connected = true
      done({ ok: true, username: bot.username, version: bot.version, server_version: ctl.serverVersion })
    })
    bot.once('kicked', (reason) => {
      clearTimeout(timer)
      done({ ok: false, code: 'kicked', error: reasonText(reason) })
    })
    bot.once('error', (err) => {
      clearTimeout(timer)
      done({ ok: false, code: (err && err.code) || 'error', error: String(err && err.message) })
    })
    bot.once('end', (reason) => {
      clearTimeout(timer)
      ctl.connected = false
      done({ ok: false, code: 'end', error: String(reason || 'connection ended') })
    })
    installEvents(ctl, bot)
    installReflexes(ctl, bot)
  })

  // `job` comes from the Python tool class: a long job pre-empts the running one and is what
  // stop and abort reach; other actions (say, stop, look_at) run beside it. Every action, job or
  // not, can be cancelled by its id (the bridge's timeout and cancellation).
  ctl.running = new Map() // id -> { name, controller }
  ctl.act = async (name, argsJson, id, job) => {
    const started = Date.now()
    let quiet = !!GUARD_CALLS[name]
    const finish = (ok, result, error) => {
      const out = { ok, result: result === undefined ? null : result, error: error || null, elapsed_ms: Date.now() - started }
      // the runtime's own questions and lines (the guard's) are no news for the model
      if (!quiet) ctl.emit('action_finished', { action: name, ...out })
      return out
    }
    const fn = ACTIONS[name] || GUARD_CALLS[name]
    if (!fn) return finish(false, null, `unknown action '${name}'`)
    if (!ctl.bot || !ctl.connected || !ctl.bot.entity) return finish(false, null, 'not connected to the server')
    let args
    try { args = JSON.parse(argsJson || '{}') } catch (err) { return finish(false, null, 'arguments are not JSON') }
    if (args && args.quiet === true) quiet = true
    const controller = new AbortController()
    if (id !== undefined) ctl.running.set(id, { name, controller })
    if (job) {
      if (ctl.job) ctl.stopJob(`pre-empted by ${name}`)
      for (const hook of ctl.hooks.jobStart) { try { hook(name) } catch (e) { /* a reflex failing must not stop a job */ } }
      ctl.job = { name, controller, id }
    }
    if (job) ctl.bot.emilReserved = args.reserved && typeof args.reserved === 'object' ? args.reserved : {}
    try {
      // a long job needs Emil out of bed (except the one that keeps him there)
      if (job && ctl.bot.isSleeping && !fn.inBed) await ctl.wake()
      const result = await fn(ctl, args, controller.signal)
      if (controller.signal.aborted) return finish(false, null, `aborted: ${controller.signal.reason || 'stopped'}`)
      return finish(true, result, null)
    } catch (err) {
      if (controller.signal.aborted) return finish(false, null, `aborted: ${controller.signal.reason || 'stopped'}`)
      return finish(false, null, String((err && err.message) || err))
    } finally {
      if (ctl.job && ctl.job.controller === controller) { ctl.job = null; ctl.bot.emilReserved = {} }
      if (ctl.running.has(id) && ctl.running.get(id).controller === controller) ctl.running.delete(id)
    }
  }

  // The bridge's entry point: returns at once; the outcome comes back through the one event
  // callback as {kind: '_result', id, ok, result, error, elapsed_ms}, so no bridge call ever
  // blocks for the length of a job.
  ctl.start = (id, name, argsJson, job) => {
    ctl.act(name, argsJson, id, job === true).then(
      (out) => { try { events.emit('event', JSON.stringify({ kind: '_result', id, ...out })) } catch (e) { /* Python gone */ } },
      (err) => { try { events.emit('event', JSON.stringify({ kind: '_result', id, ok: false, result: null, error: String(err), elapsed_ms: 0 })) } catch (e) { /* Python gone */ } }
    )
    return true
  }

  // Aborting a job stops every motor plugin so nothing keeps walking or swinging after it.
  ctl.stopJob = (reason) => {
    const job = ctl.job
    ctl.job = null
    if (job) job.controller.abort(reason)
    ctl.halt()
    return job ? job.name : null
  }

  ctl.halt = () => {
    const bot = ctl.bot
    if (!bot) return
    try { bot.pathfinder.stop() } catch (e) { /* not moving */ }
    try { bot.pathfinder.setGoal(null) } catch (e) { /* not moving */ }
    try { bot.pvp.forceStop() } catch (e) { /* not fighting */ }
    try { bot.stopDigging() } catch (e) { /* not digging */ }
    try { bot.deactivateItem() } catch (e) { /* not using */ }
    try { bot.clearControlStates() } catch (e) { /* not moving */ }
    if (bot.isSleeping) bot.wake().catch(() => {})
    ctl.following = null
  }

  // Get out of bed and wait for the server to say so (mineflayer's 'wake'), at most 3 s.
  ctl.wake = async () => {
    const bot = ctl.bot
    if (!bot || !bot.isSleeping) return
    const woke = new Promise((resolve) => { bot.once('wake', resolve); setTimeout(resolve, 3000) })
    await bot.wake()
    await woke
  }

  // Abort one action started through start(id, ...) if it is still running: the job with all
  // its motors, or an action beside it through its own signal only (the job keeps going).
  ctl.cancel = (id, reason) => {
    if (ctl.job && ctl.job.id === id) return JSON.stringify({ aborted: ctl.stopJob(reason || 'cancelled') })
    const action = ctl.running.get(id)
    if (!action) return JSON.stringify({ aborted: null })
    action.controller.abort(reason || 'cancelled')
    return JSON.stringify({ aborted: action.name })
  }
  ctl.abort = (reason) => JSON.stringify({ aborted: ctl.stopJob(reason || 'aborted by the runtime') })
  ctl.snapshot = () => JSON.stringify(snapshot(ctl))
  ctl.setReflexes = (json) => { Object.assign(ctl.reflexes, JSON.parse(json)); return JSON.stringify(ctl.reflexes) }
  ctl.quit = () => {
    ctl.stopJob('quit')
    if (ctl.bot) { try { ctl.bot.quit() } catch (e) { /* gone */ } }
    ctl.connected = false
    return true
  }
  // Test and benchmark hook: the raw process id lets Python kill Node to prove it survives.
  ctl.pid = () => process.pid
  return ctl
}

module.exports = { createController }
