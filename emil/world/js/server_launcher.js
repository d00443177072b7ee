'use strict'
// Starts flying-squid for Emil's demo and tests. Usage: node server_launcher.js '<json options>'
// Prints one line `EMIL_SERVER_LISTENING <port>` on stdout when it accepts connections, and
// exits cleanly when stdin closes (the Python parent died or asked it to stop) or on SIGTERM.
const path = require('path')
const { need } = require('./emil_require')
const mcServer = need('flying-squid')

const opts = JSON.parse(process.argv[2] || '{}')
const settings = {
  motd: 'Emil test server',
  port: opts.port || 0,
  host: '127.0.0.1',
  'max-players': 20,
  'online-mode': false,
  logging: false,
  gameMode: opts.gameMode ?? 0,
  difficulty: 1,
  generation: { name: 'superflat', options: { worldHeight: 80 } },
  kickTimeout: 10000,
  plugins: { [path.join(__dirname, 'emil_squid_plugin.js')]: {} },
  modpe: false,
  'view-distance': opts.viewDistance || 4,
  'player-list-text': { header: { text: 'Emil' }, footer: { text: 'embedded flying-squid' } },
  'everybody-op': opts.everybodyOp ?? true,
  'max-entities': 200,
  version: opts.version || '1.20.4'
}

let serv
try {
  serv = mcServer.createMCServer(settings)
} catch (err) {
  process.stderr.write(`EMIL_SERVER_ERROR ${err.message}\n`)
  process.exit(2)
}
serv.on('error', (err) => process.stderr.write(`server error: ${err && err.stack}\n`))
serv.on('listening', (port) => process.stdout.write(`EMIL_SERVER_LISTENING ${port}\n`))

let stopping = false
async function stop () {
  if (stopping) return
  stopping = true
  try { await serv.destroy() } catch (err) { /* closing anyway */ }
  process.exit(0)
}
process.stdin.on('end', stop)
process.stdin.on('close', stop)
process.stdin.resume()
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
// flying-squid rethrows some plugin errors asynchronously; keep serving and say so
process.on('uncaughtException', (err) => process.stderr.write(`uncaught: ${err && err.stack}\n`))
