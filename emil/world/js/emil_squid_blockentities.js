'use strict'
// Block entities that hold items (furnaces, chests), kept by the server per world and position,
// as vanilla keeps them beside the block: created on first use, their items dropped when the
// block is dug (or replaced some other way: /setblock, an explosion), then forgotten.
const { need } = require('./emil_require')

// store(serv, { names, create }) -> { at(world, position), dug(world, position), all() }
//   names: block names this store serves; create(world, position) -> entity with an `items` array
function createStore (serv, { names, create }) {
  const registry = serv.registry
  const ids = new Set(names.map((n) => registry.blocksByName[n]?.id).filter((id) => id !== undefined))
  const all = new Map()
  const key = (world, p) => `${world === serv.netherworld ? 'nether' : 'overworld'}:${p.x},${p.y},${p.z}`

  function dropContents (entity) {
    const { Vec3 } = need('vec3')
    for (const it of entity.items) {
      if (!it) continue
      // flying-squid's pick-up adds one item per entity, so one entity per item
      for (let i = 0; i < it.count; i++) {
        serv.spawnObject(registry.entitiesByName.item.id, entity.world, entity.position.offset(0.5, 0.5, 0.5), {
          velocity: new Vec3(Math.random() - 0.5, 2, Math.random() - 0.5), itemId: it.type, itemCount: 1, pickupTime: 500, deathTime: 5 * 60 * 1000
        })
      }
    }
    entity.items.fill(null)
  }

  function remove (k, entity) {
    dropContents(entity)
    all.delete(k)
    entity.removed?.()
  }

  let checking = false
  serv.on('tick', async (delta, count) => {
    if (count % 20 !== 0 || checking || all.size === 0) return
    checking = true
    try {
      for (const [k, entity] of all) {
        if (!ids.has(await entity.world.getBlockType(entity.position))) remove(k, entity)
      }
    } catch (err) { /* world unloading */ }
    checking = false
  })

  return {
    ids,
    at (world, position) {
      const k = key(world, position)
      if (!all.has(k)) all.set(k, create(world, position.clone()))
      return all.get(k)
    },
    dug (world, position) {
      const k = key(world, position)
      if (all.has(k)) remove(k, all.get(k))
    },
    all: () => all.values()
  }
}

// Drops a store's contents when a player digs one of its blocks.
function dropOnDig (player, store) {
  player.on('dug', ({ position, block }) => {
    if (block && store.ids.has(block.type)) store.dug(player.world, position)
  })
}

module.exports = { createStore, dropOnDig }
