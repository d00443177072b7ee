'use strict'
// Smelting and fuel, as vanilla 1.20 furnaces have them. minecraft-data has no smelting recipes,
// so the common vanilla furnace recipes are listed here by hand (no experience values; blast
// furnaces and smokers are not served). Pure data: the server's furnaces
// (emil_squid_furnace.js) and Emil's smelt tool (emil_act_crafting.js) read the same tables.

const COOK_TICKS = 200 // vanilla: one item every 10 s

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

// The item a furnace makes of `name`, or undefined (own keys only: `name` may come from a model).
function smeltsTo (name) { return Object.hasOwn(SMELTING, name) ? SMELTING[name] : undefined }

// Ticks one item of `name` burns for (0: not a fuel).
function burnTicks (name) { return (Object.hasOwn(FUEL, name) && FUEL[name]) || 0 }

module.exports = { COOK_TICKS, SMELTING, FUEL, smeltsTo, burnTicks }
