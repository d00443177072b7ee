'use strict'
// The command rule, the bot's half of emil/world/chat.py (read its docstring for what mineflayer,
// vanilla and flying-squid do with a chat string). Python checks every chat piece before it
// sends it here; the bot checks the same piece again, so neither side is the only guard. A test
// runs both over one generated table (tests/unit/world/test_chat_rule.py).
//
// A piece reads as a command when, after NFKC and skipping leading whitespace, controls, format
// characters, combining marks, private-use, surrogate or unassigned code points and invisible
// fillers, its first character is "/" or a slash look-alike.

const SLASHES = new Set(['/', '\uff0f', '\u2044', '\u2215', '\u29f8', '\u2571', '\u27cb', '\u2afb', '\u2afd', '\u1735', '\u3033'])
const SKIPPED = /^[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zs}\p{Zl}\p{Zp}\p{Mn}\p{Mc}\p{Me}\u115f\u1160\u3164\uffa0\u2800]$/u

function readsAsCommand (piece) {
  for (const ch of String(piece).normalize('NFKC')) {
    if (SKIPPED.test(ch)) continue
    return SLASHES.has(ch)
  }
  return false
}

// Commands go out only when the operator allowed them and every player whose words are in the
// turn (passed with each chat action) is a configured operator; nobody's words: no command.
function mayCommand (options, requesters) {
  const operators = new Set(Array.isArray(options.operators) ? options.operators : [])
  const who = Array.isArray(requesters) ? requesters : []
  return options.allowCommands === true && who.length > 0 && who.every((name) => operators.has(name))
}

// Throws (the model reads the message) when `piece` must not go out under these options.
function checkChat (options, piece, requesters) {
  if (readsAsCommand(piece) && !mayCommand(options, requesters)) {
    throw new Error('refused by the bot: this chat would be read as a server command, and no operator-only turn allows it')
  }
}

module.exports = { readsAsCommand, mayCommand, checkChat, SLASHES }
