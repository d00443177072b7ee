'use strict'
// Furnaces for flying-squid 1.12: a block entity per placed furnace that burns fuel and cooks
// every server tick as vanilla's AbstractFurnaceBlockEntity.serverTick does (fuel burn times,
// 200 ticks a smelt, the lit block state), whether or not anybody has it open. Its window (and
// the progress sent as window properties 0-3: fuel left, fuel total, progress, progress total)
// is in js/emil_squid_windows.js. Breaking the furnace drops what it holds.
//
// minecraft-data has no smelting recipes, so the common vanilla 1.20 furnace recipes are listed
// here (no experience is given). Blast furnaces and smokers are not served.
const { need } = require('./emil_require')

const COOK_TICKS = 200
const COLORS = ['white', 'orange', 'magenta', 'light_blue', 'yellow', 'lime', 'pink', 'gray', 'light_gray', 'cyan', 'purple', 'blue', 'brown', 'green', 'red', 'black']
const WOODS = ['oak', 'spruce', 'birch', 'jungle', 'acacia', 'dark_oak', 'mangrove', 'cherry']

const SMELTING = {
  raw_iron: 'iron_ingot', iron_ore: 'iron_ingot', deepslate_iron_ore: 'iron_ingot',
  raw_gold: 'gold_ingot', gold_ore: 'gold_ingot', deepslate_gold_ore: 'gold_ingot', nether_gold_ore: 'gold_ingot',
  raw_copper: 'copper_ingot', copper_ore: 'copper_ingot', deepslate_copper_ore: 'copper_ingot',
  coal_ore: 'coal', deepslate_coal_ore: 'coal', diamond_ore: 'diamond', deepslate_diamond_ore: 'diamond',
  emerald_ore: 'emerald', deepslate_emerald_ore: 'emerald', lapis_ore: 'lapis_lazuli', deepslate_lapis_ore: 'lapis_lazuli',
  redstone_ore: 'redstone', deepslate_redstone_ore: 'redstone', nether_quartz_ore: 'quartz', ancient_debris: 'netherite_scrap',
  sand: 'glass', red_sand: 'glass', cobblestone: 'stone', stone: 'smooth_stone', cobbled_deepslate: 'deepslate',
  sandstone: 'smooth_sandstone', red_sandstone: 'smooth_red_sandstone', quartz_block: 'smooth_quartz', basalt: 'smooth_basalt',
  stone_bricks: 'cracked_stone_bricks', deepslate_bricks: 'cracked_deepslate_bricks', deepslate_tiles: 'cracked_deepslate_tiles',
  nether_bricks: 'cracked_nether_bricks', polished_blackstone_bricks: 'cracked_polished_blackstone_bricks',
  clay_ball: 'brick', clay: 'terracotta', netherrack: 'nether_brick', cactus: 'green_dye', sea_pickle: 'lime_dye',
  wet_sponge: 'sponge', chorus_fruit: 'popped_chorus_fruit', kelp: 'dried_kelp',
  beef: 'cooked_beef', porkchop: 'cooked_porkchop', chicken: 'cooked_chicken', mutton: 'cooked_mutton', rabbit: 'cooked_rabbit',
  cod: 'cooked_cod', salmon: 'cooked_salmon', potato: 'baked_potato'
}
for (const w of WOODS) {
  for (const log of [`${w}_log`, `${w}_wood`, `stripped_${w}_log`, `stripped_${w}_wood`]) SMELTING[log] = 'charcoal'
}
for (const c of COLORS) SMELTING[`${c}_terracotta`] = `${c}_glazed_terracotta`

// vanilla AbstractFurnaceBlockEntity.getFuel (ticks of burning per item)
const FUEL = {
  lava_bucket: 20000, coal_block: 16000, dried_kelp_block: 4001, blaze_rod: 2400, coal: 1600, charcoal: 1600,
  bamboo_block: 300, stripped_bamboo_block: 300, bamboo_planks: 300, bamboo_mosaic: 300, crafting_table: 300, bookshelf: 300,
  chest: 300, trapped_chest: 300, note_block: 300, jukebox: 300, lectern: 300, daylight_detector: 300, barrel: 300,
  ladder: 300, bow: 300, crossbow: 300, fishing_rod: 300, composter: 300, smithing_table: 300, cartography_table: 300,
  fletching_table: 300, loom: 300, mangrove_roots: 300, stick: 100, bowl: 100, dead_bush: 100, azalea: 100,
  flowering_azalea: 100, bamboo: 50, scaffolding: 50,
  wooden_sword: 200, wooden_pickaxe: 200, wooden_axe: 200, wooden_shovel: 200, wooden_hoe: 200
}
for (const w of [...WOODS, 'bamboo']) {
  for (const suffix of ['_log', '_wood', '_planks', '_stairs', '_fence', '_fence_gate', '_trapdoor', '_pressure_plate']) FUEL[`${w}${suffix}`] ??= 300
  FUEL[`stripped_${w}_log`] = 300
  FUEL[`stripped_${w}_wood`] = 300
  FUEL[`${w}_slab`] = 150
  FUEL[`${w}_door`] = 200
  FUEL[`${w}_sign`] = 200
  FUEL[`${w}_hanging_sign`] = 800
  FUEL[`${w}_button`] = 100
  FUEL[`${w}_sapling`] = 100
  FUEL[`${w}_boat`] = 1200
  FUEL[`${w}_chest_boat`] = 1200
}
for (const c of COLORS) { FUEL[`${c}_wool`] = 100; FUEL[`${c}_carpet`] = 67; FUEL[`${c}_banner`] = 300 }

function install (serv) {
  const registry = serv.registry
  const Item = need('prismarine-item')(registry)
  const furnaceBlock = registry.blocksByName.furnace
  const nameOf = (it) => (it ? registry.items[it.type]?.name : null)
  const all = new Map()
  const key = (world, p) => `${world === serv.netherworld ? 'nether' : 'overworld'}:${p.x},${p.y},${p.z}`

  const smeltResult = (it) => {
    const out = SMELTING[nameOf(it)]
    return out ? registry.itemsByName[out] : null
  }
  const fuelTicks = (it) => FUEL[nameOf(it)] || 0

  function create (world, position) {
    const f = {
      world,
      position: position.clone(),
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

  function dropContents (f) {
    const { Vec3 } = need('vec3')
    for (const it of f.items) {
      if (!it) continue
      for (let i = 0; i < it.count; i++) {
        serv.spawnObject(registry.entitiesByName.item.id, f.world, f.position.offset(0.5, 0.5, 0.5), {
          velocity: new Vec3(Math.random() - 0.5, 2, Math.random() - 0.5), itemId: it.type, itemCount: 1, pickupTime: 500, deathTime: 5 * 60 * 1000
        })
      }
    }
    f.items = [null, null, null]
  }

  let checking = false
  serv.on('tick', async (delta, count) => {
    for (const f of all.values()) tick(f)
    // a furnace replaced by other means than digging (/setblock...) stops existing
    if (count % 20 !== 0 || checking || all.size === 0) return
    checking = true
    try {
      for (const [k, f] of all) {
        const type = await f.world.getBlockType(f.position)
        if (type !== furnaceBlock.id) { dropContents(f); all.delete(k) }
      }
    } catch (err) { /* world unloading */ }
    checking = false
  })

  const furnaces = {
    at (world, position) {
      const k = key(world, position)
      if (!all.has(k)) all.set(k, create(world, position))
      return all.get(k)
    },
    isFuel: (it) => fuelTicks(it) > 0,
    canSmelt: (it) => !!smeltResult(it),
    dug (world, position) {
      const k = key(world, position)
      const f = all.get(k)
      if (!f) return
      dropContents(f)
      all.delete(k)
    }
  }
  return furnaces
}

function installPlayer (player, furnaces) {
  player.on('dug', ({ position, block }) => {
    if (block && block.name === 'furnace') furnaces.dug(player.world, position)
  })
}

module.exports = { install, installPlayer, SMELTING, FUEL }
