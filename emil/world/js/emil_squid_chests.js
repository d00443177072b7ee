'use strict'
// Chests for flying-squid 1.12 (its own chest plugin opens an empty window whose contents are
// "NOT IMPLEMENTED"): a block entity of 27 slots per chest or trapped chest, kept while the
// server runs and dropped when the chest is dug; the window (generic_9x3, what mineflayer's
// openContainer/openChest expect) with vanilla's click rules is in emil_squid_windows.js.
// As vanilla: a chest under a solid block does not open, the lid opens for everybody nearby
// while someone looks inside (block_action 1 with the number of viewers, which mineflayer reports
// as chestLidMove), with the open and close sounds.
//
// Not vanilla: two chests side by side stay two single chests (no large chest); ender chests
// and shulker boxes keep flying-squid's empty window.
const { createStore, dropOnDig } = require('./emil_squid_blockentities')

const SLOTS = 27
const NAMES = ['chest', 'trapped_chest']

function install (serv) {
  const registry = serv.registry
  const store = createStore(serv, {
    names: NAMES,
    create: (world, position) => ({ world, position, items: Array(SLOTS).fill(null), viewers: new Set() })
  })

  async function lid (chest) {
    const type = await chest.world.getBlockType(chest.position)
    for (const p of serv.players) {
      if (p.world !== chest.world || p.position.distanceTo(chest.position) > 64) continue
      p.sendBlockAction(chest.position, 1, chest.viewers.size, type)
    }
  }

  return {
    names: NAMES,
    store,
    // A chest opens unless a solid block sits on it (vanilla ChestBlock.isChestBlockedAt).
    async blocked (world, position) {
      const above = registry.blocks[await world.getBlockType(position.offset(0, 1, 0))]
      return !!above && above.boundingBox === 'block' && !above.transparent
    },
    opened (chest, player) {
      if (chest.viewers.has(player)) return
      chest.viewers.add(player)
      lid(chest).catch(() => {})
      if (chest.viewers.size === 1) serv.playSound('block.chest.open', chest.world, chest.position.offset(0.5, 0.5, 0.5))
    },
    closed (chest, player) {
      if (!chest.viewers.delete(player)) return
      lid(chest).catch(() => {})
      if (chest.viewers.size === 0) serv.playSound('block.chest.close', chest.world, chest.position.offset(0.5, 0.5, 0.5))
    }
  }
}

function installPlayer (player, chests) {
  dropOnDig(player, chests.store)
}

module.exports = { install, installPlayer, SLOTS }
