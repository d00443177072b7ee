'use strict'
// The bot's own check of the player-attack and command rules (emil/trust/rules.py: rows
// attack.player, attack.unknown, chat.command), so that a bug on the Python side is not a grief.
// Python checks every action first and passes, with each one, `authority`: the requesters (every
// player whose words are in the turn), the player name it resolved for an attack, and for a
// command the confirmation code when it was confirmed. The bot decides again from what it saw
// itself: the operators it was started with, the players the server lists, and the operators'
// own chat lines as they reached this bot (never a line Python hands it).

const { readsAsCommand } = require('./emil_chat_rule')

const COMMAND_WINDOW_MS = 10 * 60 * 1000 // an operator's line orders a command for this long at most
const HEARD_LIMIT = 50 // operator lines kept
// Vanilla's spam counter, kept with a margin: every chat line or command adds 20, every tick
// (50 ms) takes 1 away, and past 200 the server kicks. So a burst of 9 lines, then one a second.
const SPAM_PER_LINE = 20
const SPAM_LIMIT = 180
const SPAM_TICK_MS = 50
// Targets that name no one in particular: mineflayer-pvp would pick whatever entity is nearest.
const GENERIC = new Set(['player', 'players', 'human', 'humans', 'everyone', 'everybody', 'anyone', 'anybody',
  'someone', 'somebody', 'all', 'me', 'you', 'him', 'her', 'them', 'nearest', 'closest', 'self', 'entity', 'mob', 'mobs'])

// The Python twin is emil.trust.authority.command_in_words (tests run both over one table).
const OPENERS = new Set(['"', "'", '`', '(', '\u201c', '\u2018', '\u00ab', ':'])
const CLOSERS = new Set(['"', "'", '`', ')', '\u201d', '\u2019', '\u00bb'])
const STOPS = new Set(['.', ',', ';', '!', '?'])
// \x1c-\x1f: Python's str.split() splits on them too, and the twins must agree
// eslint-disable-next-line no-control-regex
const squash = (s) => String(s).split(/[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\u001c-\u001f]+/).filter(Boolean).join(' ')

function commandInWords (command, words) {
  const cmd = squash(command)
  const text = squash(words)
  if (!cmd) return false
  let start = 0
  let i
  while ((i = text.indexOf(cmd, start)) >= 0) {
    start = i + 1
    if (i > 0 && !(text[i - 1] === ' ' || OPENERS.has(text[i - 1]))) continue
    const j = i + cmd.length
    if (j === text.length || CLOSERS.has(text[j])) return true
    if (STOPS.has(text[j]) && (j + 1 === text.length || text[j + 1] === ' ')) return true
  }
  return false
}

function operatorsOf (ctl) {
  return new Set(Array.isArray(ctl.options.operators) ? ctl.options.operators : [])
}

function requestersOf (authority) {
  const who = authority && Array.isArray(authority.requesters) ? authority.requesters : []
  return who.map(String)
}

function operatorOrder (ctl, authority) {
  const ops = operatorsOf(ctl)
  const who = requestersOf(authority)
  return who.length > 0 && who.every((n) => ops.has(n))
}

// Called for every chat line and whisper the bot receives (emil_events.js).
function heard (ctl, sender, text) {
  if (!operatorsOf(ctl).has(sender)) return
  const lines = ctl.heardOperators || (ctl.heardOperators = [])
  lines.push({ sender, text: String(text), at: Date.now() })
  if (lines.length > HEARD_LIMIT) lines.splice(0, lines.length - HEARD_LIMIT)
}

const refuse = (why) => { throw new Error(`refused by the bot: ${why}`) }

// A chat piece about to go out: a command only on an operator's order and exact words (or a
// confirmation the bot itself asked), and never faster than a vanilla server lets a client chat.
function checkChat (ctl, piece, authority) {
  const now = Date.now()
  const spam = ctl.spam || (ctl.spam = { level: 0, at: now })
  spam.level = Math.max(0, spam.level - (now - spam.at) / SPAM_TICK_MS)
  spam.at = now
  if (spam.level + SPAM_PER_LINE > SPAM_LIMIT) refuse('too many chat lines too fast already (a server kicks for spam); wait a second')
  if (readsAsCommand(piece)) {
    if (ctl.options.allowCommands !== true) refuse('this chat would be read as a server command, and commands are not enabled')
    if (!operatorOrder(ctl, authority)) refuse('this chat would be read as a server command, and no operator-only turn allows it')
    const who = new Set(requestersOf(authority))
    const lines = (ctl.heardOperators || []).filter((l) => who.has(l.sender) && now - l.at < COMMAND_WINDOW_MS)
    const own = lines.some((l) => commandInWords(piece, l.text))
    if (!own && !confirmed(ctl, piece, authority, lines, now)) {
      refuse("this command is not in an operator's own words, and no operator confirmed it")
    }
  }
  spam.level += SPAM_PER_LINE
}

function confirmed (ctl, piece, authority, lines, now) {
  const code = authority && authority.confirm ? String(authority.confirm) : null
  const pending = code && ctl.pendingCommands ? ctl.pendingCommands.get(code) : null
  if (!pending || pending.command !== piece || now > pending.expiresAt) return false
  const answer = new RegExp(`(?<![\\w])confirm(?:ed)?[\\s:,]+#?${code}(?![\\w])`, 'i')
  const ok = lines.some((l) => pending.operators.includes(l.sender) && l.at >= pending.askedAt && answer.test(l.text))
  if (ok) ctl.pendingCommands.delete(code)
  return ok
}

// The bot's own record of a question Python asked (ask_confirm): the command, the code, who.
function askConfirm (ctl, { command, code, operators, ttl_s: ttlS }) {
  if (!readsAsCommand(command)) throw new Error('only a command needs a confirmation')
  const ops = operatorsOf(ctl)
  const to = (Array.isArray(operators) ? operators : []).map(String).filter((n) => ops.has(n))
  if (!to.length) throw new Error('no operator to ask')
  const pending = ctl.pendingCommands || (ctl.pendingCommands = new Map())
  if (pending.size >= 8) pending.delete(pending.keys().next().value)
  pending.set(String(code), { command: String(command), operators: to, askedAt: Date.now(), expiresAt: Date.now() + (Number(ttlS) || 60) * 1000 })
  return to
}

// What a target names: { kind: 'player', name } (any letter case against the server's list),
// { kind: 'mob', name } (an entity type), { kind: 'generic' } or { kind: 'unknown' }.
function classifyTarget (bot, target) {
  const lower = String(target).toLowerCase()
  if (GENERIC.has(lower)) return { kind: 'generic', name: lower }
  const player = Object.keys(bot.players || {}).find((n) => n.toLowerCase() === lower)
  if (player) return { kind: 'player', name: player }
  const entity = bot.registry.entitiesByName[lower]
  if (entity && entity.type !== 'player' && lower !== 'player') return { kind: 'mob', name: lower }
  return { kind: 'unknown', name: String(target) }
}

// The entity an attack may go for, or an Error: a player only on an operator's order naming
// exactly the player Python resolved; never a generic or unknown target.
function attackTarget (ctl, target, authority) {
  const bot = ctl.bot
  const what = classifyTarget(bot, target)
  if (what.kind === 'generic' || what.kind === 'unknown') refuse(`'${target}' names no mob type and no player the server lists`)
  if (what.kind === 'player') {
    if (!operatorOrder(ctl, authority)) refuse(`attacking the player ${what.name} needs an operator's order`)
    if (!authority || authority.attack !== what.name) refuse(`the order names ${authority && authority.attack ? authority.attack : 'no player'}, not ${what.name}`)
    const p = bot.players[what.name]
    if (!p || !p.entity) throw new Error(`cannot see ${what.name} from here`)
    return p.entity
  }
  const entity = bot.nearestEntity((e) => e.name === what.name && e.type !== 'player' && e.type !== 'object' && e !== bot.entity)
  if (!entity) throw new Error(`no ${target} in sight`)
  return entity
}

module.exports = { commandInWords, heard, checkChat, askConfirm, classifyTarget, attackTarget, operatorOrder, GENERIC }
