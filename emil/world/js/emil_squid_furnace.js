'use strict'
// Furnaces for flying-squid 1.12: a block entity per placed furnace that burns fuel and cooks
// every server tick as vanilla's AbstractFurnaceBlockEntity.serverTick does (fuel burn times,
// 200 ticks a smelt, the lit block state), whether or not anybody has it open. Its window (and
// the progress sent as window properties 0-3: fuel left, fuel total, progress, progress total)
// is in js/emil_squid_windows.js. Breaking the furnace drops what it holds.
//
// The recipes and fuels are in emil_smelting.js (no experience is given). Blast furnaces and
// smokers are not served.
const { need } = require('./emil_require')
const { createStore, dropOnDig } = require('./emil_squid_blockentities')
const { COOK_TICKS, smeltsTo, burnTicks } = require('./emil_smelting')

function install (serv) {
  const registry = serv.registry
  const Item = need('prismarine-item')(registry)
  const furnaceBlock = registry.blocksByName.furnace
  const nameOf = (it) => (it ? registry.items[it.type]?.name : null)

  const smeltResult = (it) => {
    const out = smeltsTo(nameOf(it))
    return out ? registry.itemsByName[out] : null
  }
  const fuelTicks = (it) => burnTicks(nameOf(it))

  function create (world, position) {
    const f = {
      world,
      position,
      items: [null, null, null], // input, fuel, output
      litTime: 0,
      litDuration: 0,
      cookingProgress: 0,
      // 0 until an input goes in, as vanilla: the change is what sends the total to a client
      // that opened the window before (a value sent with the window itself can reach mineflayer
      // before openFurnace listens)
      cookingTotalTime: 0,
      lit: null,
      inputChanged () { f.cookingTotalTime = COOK_TICKS; f.cookingProgress = 0 }
    }
    return f
  }

  function canBurn (f) {
    const input = f.items[0]
    const result = input && smeltResult(input)
    if (!result) return false
    const out = f.items[2]
    if (!out) return true
    if (out.type !== result.id) return false
    return out.count + 1 <= Math.min(64, out.stackSize || 64)
  }

  function tick (f) {
    const wasLit = f.litTime > 0
    if (f.litTime > 0) f.litTime--
    const fuel = f.items[1]
    const hasInput = !!f.items[0]
    if (f.litTime > 0 || (fuel && hasInput)) {
      if (f.litTime <= 0 && canBurn(f)) {
        f.litTime = fuelTicks(fuel)
        f.litDuration = f.litTime
        if (f.litTime > 0) {
          const left = fuel.count - 1
          f.items[1] = left > 0 ? new Item(fuel.type, left, fuel.metadata, fuel.nbt) : (nameOf(fuel) === 'lava_bucket' ? new Item(registry.itemsByName.bucket.id, 1) : null)
        }
      }
      if (f.litTime > 0 && canBurn(f)) {
        f.cookingProgress++
        if (f.cookingProgress >= f.cookingTotalTime) {
          f.cookingProgress = 0
          f.cookingTotalTime = COOK_TICKS
          const input = f.items[0]
          const result = smeltResult(input)
          const out = f.items[2]
          f.items[2] = new Item(result.id, (out ? out.count : 0) + 1)
          f.items[0] = input.count > 1 ? new Item(input.type, input.count - 1, input.metadata, input.nbt) : null
        }
      } else {
        f.cookingProgress = 0
      }
    } else if (f.litTime <= 0 && f.cookingProgress > 0) {
      f.cookingProgress = Math.max(0, Math.min(f.cookingProgress - 2, f.cookingTotalTime))
    }
    const lit = f.litTime > 0
    if (lit !== wasLit || f.lit === null) setLit(f, lit)
  }

  // the block's `lit` property (bool states are stored true-first)
  async function setLit (f, lit) {
    f.lit = lit
    const state = await f.world.getBlockStateId(f.position)
    if (state < furnaceBlock.minStateId || state > furnaceBlock.maxStateId) return
    const offset = state - furnaceBlock.minStateId
    const next = furnaceBlock.minStateId + (offset - (offset % 2)) + (lit ? 0 : 1)
    if (next !== state) await serv.setBlock(f.world, f.position, next)
  }

  const store = createStore(serv, { names: ['furnace'], create })
  serv.on('tick', () => { for (const f of store.all()) tick(f) })

  return {
    at: store.at,
    isFuel: (it) => fuelTicks(it) > 0,
    canSmelt: (it) => !!smeltResult(it),
    store
  }
}

function installPlayer (player, furnaces) {
  dropOnDig(player, furnaces.store)
}

module.exports = { install, installPlayer }
