'use strict'
// Translated chat components in the form the version's packets carry. flying-squid 1.12's own
// _createChatComponent turns anything but plain text into its JSON spelled out as text on 1.20.3+
// (where chat is NBT), so a client read `{"translate":"container.chest"}` literally.
const { need } = require('./emil_require')

function translated (serv, key, args = []) {
  if (!serv.supportFeature('chatPacketsUseNbtComponents')) return JSON.stringify({ translate: key, with: args.map(String) })
  const nbt = need('prismarine-nbt')
  const fields = { translate: nbt.string(key) }
  if (args.length) fields.with = nbt.list(nbt.string(args.map(String)))
  return nbt.comp(fields)
}

module.exports = { translated }
