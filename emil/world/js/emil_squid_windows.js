'use strict'
// Windows for flying-squid 1.12 (1.17.1+ protocol): the server owns every slot and runs vanilla's
// click rules (AbstractContainerMenu.doClick: pick up, quick move, hotbar swap, throw, drag,
// collect-all), then syncs the client as vanilla does: what the client predicted (the click's
// changed slots and cursor) is taken as its view, and only slots where that view is wrong are
// sent back; a click with a stale state id gets the whole window. The crafting grid sends its
// result slot on every grid change (vanilla CraftingMenu.slotChangedCraftingGrid), which is
// what mineflayer's bot.craft waits for. Open windows are re-synced every tick (furnace
// progress as window properties), and closed when the player walks away or the block goes.
//
// Menus: the player's own inventory (window 0, 2x2 crafting grid), a crafting table (3x3), a
// furnace (js/emil_squid_furnace.js) and a chest (js/emil_squid_chests.js). flying-squid's own click model lost the cursor, computed
// no crafting results and let a client write any slot; its window_click, close_window,
// set_creative_slot and inventory update listeners are replaced, and so are player.collect and
// /give, which wrote into the crafting grid and past the stack size. /clear <player> (vanilla's)
// empties an inventory.
const { need } = require('./emil_require')
const { createCrafting } = require('./emil_recipes')
const { translated } = require('./emil_squid_text')

const ARMOR = { 5: /(_helmet|^carved_pumpkin|_head|_skull)$/, 6: /(_chestplate|^elytra)$/, 7: /_leggings$/, 8: /_boots$/ }
const MAX_WINDOW_ID = 100 // vanilla cycles container ids 1..100
const REACH_SQ = 64 // vanilla stillValid: within 8 blocks of the block's centre

function install (serv, { furnaces, chests }) {
  if (!serv.supportFeature('stateIdUsed')) return // the click packet this model reads is 1.17.1+
  const registry = serv.registry
  const Item = need('prismarine-item')(registry)
  const windows = need('prismarine-windows')(registry).windows
  const crafting = createCrafting(registry)
  const ctx = { serv, registry, Item, windows, crafting, furnaces, chests }

  serv.once('asap', () => {
    serv.onBlockInteraction('crafting_table', ({ block, player }) => openAt(player, block, 'crafting'))
    serv.onBlockInteraction('furnace', ({ block, player }) => openAt(player, block, 'furnace'))
    // after flying-squid's own chest handlers (registered on 'asap' too), which these replace;
    // its "registered twice" warning is expected here and would only be noise
    process.nextTick(() => {
      const warn = serv.warn
      serv.warn = () => {}
      try {
        for (const name of chests.names) {
          serv.onBlockInteraction(name, async ({ block, player }) => {
            if (player.crouching || !player.emilWindows) return false
            if (!(await chests.blocked(player.world, block.position))) player.emilWindows.open('chest', block.position)
            return true
          })
        }
      } finally {
        serv.warn = warn
      }
    })
    serv.commands.add({
      base: 'give',
      info: 'Gives an item to a player.',
      usage: '/give <player> <item> [count]',
      op: true,
      parse (str, cmdCtx) {
        const m = str.match(/^(\S+) (?:minecraft:)?([a-z0-9_]+)(?: (\d{1,4}))?$/)
        if (!m) return false
        return { players: serv.getPlayers(m[1], cmdCtx.player), item: registry.itemsByName[m[2]], name: m[2], count: m[3] ? parseInt(m[3], 10) : 1 }
      },
      action ({ players, item, name, count }) {
        if (!item) return `Unknown item '${name}'`
        if (!players.length) return 'No player was found'
        for (const p of players) {
          if (!p.emilWindows) continue
          for (let left = count; left > 0;) {
            const n = Math.min(left, item.stackSize || 64)
            p.emilWindows.give(new Item(item.id, n))
            left -= n
          }
        }
        return `Gave ${count} [${name}] to ${players.map((p) => p.username).join(', ')}`
      }
    })
    serv.commands.add({
      base: 'clear',
      info: 'Empties the inventories of players.',
      usage: '/clear <player>',
      op: true,
      parse (str, cmdCtx) { return str ? serv.getPlayers(str, cmdCtx.player) : false },
      action (players) {
        for (const p of players) p.emilWindows?.clear()
        return `Cleared the inventory of ${players.map((p) => p.username).join(', ') || 'nobody'}`
      }
    })
  })

  function openAt (player, block, kind) {
    if (player.crouching || !player.emilWindows) return false
    player.emilWindows.open(kind, block.position)
    return true
  }
  return ctx
}

// The player's side: call after every flying-squid player plugin has run (they add the listeners
// this replaces).
function installPlayer (player, serv, ctx) {
  if (!ctx) return
  const { registry, Item, windows, crafting, furnaces, chests } = ctx
  const inv = player.inventory
  const nameOf = (it) => registry.items[it.type]?.name || ''
  const copy = (it) => (it ? new Item(it.type, it.count, it.metadata, it.nbt) : null)
  const nbtEq = (a, b) => JSON.stringify(a.nbt ?? null) === JSON.stringify(b.nbt ?? null)
  const stackable = (a, b) => !!a && !!b && a.type === b.type && nbtEq(a, b)
  const same = (a, b) => (!a && !b) || (stackable(a, b) && a.count === b.count)
  const maxOf = (it) => it.stackSize || registry.items[it.type]?.stackSize || 64
  const withCount = (it, n) => (it && n > 0 ? new Item(it.type, n, it.metadata, it.nbt) : null)
  const notch = (it) => Item.toNotch(it)

  // --- slots -------------------------------------------------------------------------------
  // A slot: get(), set(item), mayPlace(item), max(item), result (take-only), onTake(taken)
  function invSlot (j) {
    return {
      j,
      get: () => inv.slots[j] || null,
      set: (it) => inv.updateSlot(j, it),
      mayPlace: (it) => (ARMOR[j] ? ARMOR[j].test(nameOf(it)) : true),
      max: (it) => Math.min(ARMOR[j] ? 1 : 64, maxOf(it)),
      result: false,
      onTake: () => {}
    }
  }
  function boxSlot (box, k, { mayPlace = () => true, result = false, onTake = () => {} } = {}) {
    return { get: () => box[k] || null, set: (it) => { box[k] = it }, mayPlace, max: (it) => maxOf(it), result, onTake }
  }

  // --- menus -------------------------------------------------------------------------------
  function craftingMenu (id, type, width, gridGet, gridSet, resultGet, resultSet, playerSlots) {
    const size = width * width
    const menu = { id, type, stateId: 0, remote: [], remoteCarried: null, dataRemote: [], width }
    const grid = []
    for (let k = 0; k < size; k++) grid.push({ get: () => gridGet(k), set: (it) => gridSet(k, it), mayPlace: () => true, max: (it) => maxOf(it), result: false, onTake: () => {} })
    const result = {
      get: resultGet,
      set: resultSet,
      mayPlace: () => false,
      max: (it) => maxOf(it),
      result: true,
      onTake: () => {
        // vanilla ResultSlot.onTake: one of each ingredient, remainders back into the grid
        for (const slot of grid) {
          const it = slot.get()
          if (!it) continue
          const left = crafting.remainder(it)
          slot.set(withCount(it, it.count - 1))
          if (!left) continue
          const rem = new Item(left.id, 1)
          if (!slot.get()) slot.set(rem)
          else give(rem)
        }
        menu.updateResult()
      }
    }
    menu.slots = [result, ...grid, ...playerSlots]
    menu.grid = grid
    menu.gridKey = () => grid.map((s) => { const it = s.get(); return it ? `${it.type}x${it.count}` : '' }).join('|')
    menu.updateResult = () => {
      const r = crafting.match(grid.map((s) => s.get()), width)
      resultSet(r ? new Item(r.id, r.count) : null)
    }
    return menu
  }

  const invMenu = craftingMenu(0, 'minecraft:inventory', 2,
    (k) => inv.slots[1 + k] || null, (k, it) => inv.updateSlot(1 + k, it),
    () => inv.slots[0] || null, (it) => inv.updateSlot(0, it),
    [])
  for (let j = 5; j < 46; j++) invMenu.slots.push(invSlot(j))
  invMenu.quickMove = (i) => {
    const slot = invMenu.slots[i]
    const armorTo = armorSlotFor(slot.get())
    if (i === 0) return moveQuick(invMenu, i, [[9, 45, true]], true)
    if (i >= 1 && i < 9) return moveQuick(invMenu, i, [[9, 45, false]])
    if (armorTo !== null && !invMenu.slots[armorTo].get()) return moveQuick(invMenu, i, [[armorTo, armorTo + 1, false]])
    if (nameOf(slot.get()) === 'shield' && !invMenu.slots[45].get()) return moveQuick(invMenu, i, [[45, 46, false]])
    if (i >= 9 && i < 36) return moveQuick(invMenu, i, [[36, 45, false]])
    if (i >= 36 && i < 45) return moveQuick(invMenu, i, [[9, 36, false]])
    return moveQuick(invMenu, i, [[9, 45, false]])
  }
  invMenu.removed = () => {
    for (const slot of invMenu.grid) {
      const it = slot.get()
      if (it) { slot.set(null); give(it) }
    }
    invMenu.updateResult()
  }
  invMenu.stillValid = async () => true

  function armorSlotFor (it) {
    if (!it) return null
    for (const j of [5, 6, 7, 8]) if (ARMOR[j].test(nameOf(it))) return j
    return null
  }

  // a container window's player part: main inventory then hotbar, inventory slots 9..44
  const playerRegion = () => range(9, 45).map(invSlot)

  function tableMenu (id, position) {
    const box = Array(9).fill(null)
    const res = { it: null }
    const menu = craftingMenu(id, 'minecraft:crafting', 3,
      (k) => box[k], (k, it) => { box[k] = it }, () => res.it, (it) => { res.it = it }, playerRegion())
    menu.position = position
    menu.quickMove = (i) => {
      if (i === 0) return moveQuick(menu, i, [[10, 46, true]], true)
      if (i >= 10 && i < 46) return moveQuick(menu, i, [[1, 10, false], i < 37 ? [37, 46, false] : [10, 37, false]])
      return moveQuick(menu, i, [[10, 46, false]])
    }
    menu.removed = () => {
      for (let k = 0; k < 9; k++) if (box[k]) { const it = box[k]; box[k] = null; give(it) }
    }
    menu.stillValid = () => blockStill(position, 'crafting_table')
    return menu
  }

  function furnaceMenu (id, position) {
    const f = furnaces.at(player.world, position)
    const menu = { id, type: 'minecraft:furnace', stateId: 0, remote: [], remoteCarried: null, dataRemote: [], position, furnace: f }
    menu.slots = [
      boxSlot(f.items, 0, { mayPlace: () => true }),
      boxSlot(f.items, 1, { mayPlace: (it) => furnaces.isFuel(it) || nameOf(it) === 'bucket' }),
      boxSlot(f.items, 2, { mayPlace: () => false, result: true }),
      ...playerRegion()
    ]
    // vanilla: a new kind of input restarts the cooking
    const input = menu.slots[0]
    const setInput = input.set
    input.set = (it) => { const before = input.get(); setInput(it); if (!stackable(before, it)) f.inputChanged() }
    menu.quickMove = (i) => {
      if (i === 2) return moveQuick(menu, i, [[3, 39, true]], true)
      if (i !== 0 && i !== 1) {
        const it = menu.slots[i].get()
        if (furnaces.canSmelt(it)) return moveQuick(menu, i, [[0, 1, false]])
        if (furnaces.isFuel(it)) return moveQuick(menu, i, [[1, 2, false]])
        if (i >= 3 && i < 30) return moveQuick(menu, i, [[30, 39, false]])
        return moveQuick(menu, i, [[3, 30, false]])
      }
      return moveQuick(menu, i, [[3, 39, false]])
    }
    menu.data = () => [f.litTime, f.litDuration, f.cookingProgress, f.cookingTotalTime]
    menu.removed = () => {}
    menu.stillValid = () => blockStill(position, 'furnace')
    return menu
  }

  function chestMenu (id, position) {
    const chest = chests.store.at(player.world, position)
    const menu = { id, type: 'minecraft:generic_9x3', stateId: 0, remote: [], remoteCarried: null, dataRemote: [], position }
    menu.slots = [...range(0, chest.items.length).map((k) => boxSlot(chest.items, k)), ...playerRegion()]
    const size = chest.items.length
    // vanilla ChestMenu.quickMoveStack: out of the chest into the inventory from its end, or in
    menu.quickMove = (i) => moveQuick(menu, i, i < size ? [[size, size + 36, true]] : [[0, size, false]])
    menu.removed = () => chests.closed(chest, player)
    menu.gone = menu.removed // the player left with the chest open
    menu.stillValid = async () => chests.store.ids.has(await player.world.getBlockType(position)) &&
      player.position.distanceSquared(position.offset(0.5, 0.5, 0.5)) <= REACH_SQ
    chests.opened(chest, player)
    return menu
  }

  async function blockStill (position, name) {
    const centre = position.offset(0.5, 0.5, 0.5)
    if (player.position.distanceSquared(centre) > REACH_SQ) return false
    const type = await player.world.getBlockType(position)
    return registry.blocks[type]?.name === name
  }

  // --- vanilla click rules -------------------------------------------------------------------
  const st = { carried: null, menu: invMenu, drag: { status: 0, type: 0, slots: [] }, ready: false, clicking: false }

  // moveItemStackTo on a copy of the slot's stack; returns what was left of it
  function moveItemStackTo (menu, stack, start, end, reverse) {
    let left = stack.count
    const order = []
    for (let k = start; k < end; k++) order.push(k)
    if (reverse) order.reverse()
    if (maxOf(stack) > 1) {
      for (const k of order) {
        if (left <= 0) break
        const slot = menu.slots[k]
        const cur = slot.get()
        if (!cur || slot.result || !stackable(cur, stack)) continue
        const max = Math.min(slot.max(cur), maxOf(stack))
        const n = Math.min(left, max - cur.count)
        if (n > 0) { slot.set(withCount(cur, cur.count + n)); left -= n }
      }
    }
    if (left > 0) {
      for (const k of order) {
        const slot = menu.slots[k]
        if (slot.get() || slot.result || !slot.mayPlace(stack)) continue
        const n = Math.min(left, slot.max(stack))
        slot.set(withCount(stack, n))
        left -= n
        break
      }
    }
    return left
  }

  // quickMoveStack: try the ranges in order; the rest stays (or, from a result slot, drops)
  function moveQuick (menu, i, ranges, fromResult = false) {
    const slot = menu.slots[i]
    const stack = slot.get()
    if (!stack) return null
    let left = stack.count
    for (const [a, b, rev] of ranges) {
      if (left <= 0) break
      left = moveItemStackTo(menu, withCount(stack, left), a, b, rev)
    }
    if (left === stack.count) return null
    if (fromResult) {
      slot.set(null)
      slot.onTake(stack)
      if (left > 0) dropItem(withCount(stack, left))
    } else {
      slot.set(withCount(stack, left))
      slot.onTake(stack)
    }
    return stack
  }

  function safeInsert (slot, stack, n) {
    if (!stack || !slot.mayPlace(stack)) return stack
    const cur = slot.get()
    if (cur && !stackable(cur, stack)) return stack
    const k = Math.min(n, stack.count, slot.max(stack) - (cur ? cur.count : 0))
    if (k <= 0) return stack
    slot.set(withCount(stack, (cur ? cur.count : 0) + k))
    return withCount(stack, stack.count - k)
  }

  // take up to n (a result slot: all of it or nothing); returns the taken stack
  function tryTake (slot, n, room) {
    const it = slot.get()
    if (!it) return null
    if (slot.result) {
      if (room < it.count) return null
      slot.set(null)
      slot.onTake(it)
      return it
    }
    const k = Math.min(n, room, it.count)
    if (k <= 0) return null
    slot.set(withCount(it, it.count - k))
    const taken = withCount(it, k)
    slot.onTake(taken)
    return taken
  }

  function canQuickReplace (slot, stack) {
    const cur = slot.get()
    return !cur || (stackable(cur, stack) && cur.count <= maxOf(stack))
  }

  function click (menu, slotId, button, mode) {
    const slots = menu.slots
    const valid = (s) => Number.isInteger(s) && s >= 0 && s < slots.length
    if (mode !== 5) st.drag = { status: 0, type: 0, slots: [] }
    if (mode === 0 || mode === 1) {
      if (button !== 0 && button !== 1) return
      if (slotId === -999) {
        if (mode === 0 && st.carried) {
          if (button === 0) { dropItem(st.carried); st.carried = null } else { dropItem(withCount(st.carried, 1)); st.carried = withCount(st.carried, st.carried.count - 1) }
        }
        return
      }
      if (!valid(slotId)) return
      if (mode === 1) {
        const first = slots[slotId].get()
        let moved = menu.quickMove(slotId)
        // vanilla repeats a quick move from a result slot while it still offers the same item
        while (moved && slots[slotId].result && stackable(slots[slotId].get(), first)) moved = menu.quickMove(slotId)
        return
      }
      const slot = slots[slotId]
      const item = slot.get()
      const carried = st.carried
      if (!item) {
        if (carried) st.carried = safeInsert(slot, carried, button === 0 ? carried.count : 1)
      } else if (!carried) {
        st.carried = tryTake(slot, button === 0 ? item.count : Math.ceil(item.count / 2), Infinity)
      } else if (slot.mayPlace(carried)) {
        if (stackable(item, carried)) st.carried = safeInsert(slot, carried, button === 0 ? carried.count : 1)
        else if (carried.count <= slot.max(carried)) { slot.set(carried); st.carried = item }
      } else if (stackable(item, carried)) {
        const taken = tryTake(slot, item.count, maxOf(carried) - carried.count)
        if (taken) st.carried = withCount(carried, carried.count + taken.count)
      }
    } else if (mode === 2) {
      if (!valid(slotId)) return
      const hot = button >= 0 && button <= 8 ? 36 + button : (button === 40 ? 45 : null)
      if (hot === null) return
      const slot = slots[slotId]
      const hotItem = inv.slots[hot] || null
      const it = slot.get()
      if (!hotItem && it) {
        inv.updateSlot(hot, it)
        slot.set(null)
        slot.onTake(it)
      } else if (hotItem && !it) {
        if (!slot.mayPlace(hotItem)) return
        const max = slot.max(hotItem)
        slot.set(withCount(hotItem, Math.min(max, hotItem.count)))
        inv.updateSlot(hot, withCount(hotItem, hotItem.count - Math.min(max, hotItem.count)))
      } else if (hotItem && it && slot.mayPlace(hotItem)) {
        const max = slot.max(hotItem)
        if (hotItem.count > max) {
          slot.set(withCount(hotItem, max))
          inv.updateSlot(hot, withCount(hotItem, hotItem.count - max))
          slot.onTake(it)
          give(it)
        } else {
          inv.updateSlot(hot, it)
          slot.set(hotItem)
          slot.onTake(it)
        }
      }
    } else if (mode === 3) {
      if (player.gameMode !== 1 || st.carried || !valid(slotId)) return
      const it = slots[slotId].get()
      if (it) st.carried = withCount(it, maxOf(it))
    } else if (mode === 4) {
      if (st.carried || !valid(slotId)) return
      const it = slots[slotId].get()
      if (!it) return
      const taken = tryTake(slots[slotId], button === 0 ? 1 : it.count, Infinity)
      if (taken) dropItem(taken)
    } else if (mode === 5) {
      drag(menu, slotId, button)
    } else if (mode === 6) {
      if (!valid(slotId) || !st.carried || button !== 0 && button !== 1) return
      const here = slots[slotId]
      if (here.get() && !here.result) return
      const order = [...slots.keys()]
      if (button === 1) order.reverse()
      for (let pass = 0; pass < 2; pass++) {
        for (const k of order) {
          const c = st.carried
          if (c.count >= maxOf(c)) break
          const s = slots[k]
          const it = s.get()
          if (!it || s.result || !stackable(it, c)) continue
          if (pass === 0 && it.count === maxOf(it)) continue
          const taken = tryTake(s, it.count, maxOf(c) - c.count)
          if (taken) st.carried = withCount(c, c.count + taken.count)
        }
      }
    }
  }

  // vanilla quick craft (drag): start (button 0/4/8 at slot -999), add slots, end
  function drag (menu, slotId, button) {
    const d = st.drag
    const prev = d.status
    const status = button & 3
    const reset = () => { st.drag = { status: 0, type: 0, slots: [] } }
    if ((prev !== 1 || status !== 2) && prev !== status) return reset()
    if (!st.carried) return reset()
    if (status === 0) {
      const type = (button >> 2) & 3
      if (type === 0 || type === 1 || (type === 2 && player.gameMode === 1)) st.drag = { status: 1, type, slots: [] }
      else reset()
    } else if (status === 1) {
      const slot = menu.slots[slotId]
      if (slot && !slot.result && canQuickReplace(slot, st.carried) && slot.mayPlace(st.carried) &&
        (d.type === 2 || st.carried.count > d.slots.length) && !d.slots.includes(slotId)) d.slots.push(slotId)
    } else if (status === 2) {
      const { type, slots } = d
      reset()
      if (slots.length === 1) return click(menu, slots[0], type, 0)
      if (!slots.length) return
      const c = st.carried
      let remaining = c.count
      for (const k of slots) {
        const slot = menu.slots[k]
        if (!canQuickReplace(slot, c) || !slot.mayPlace(c) || (type !== 2 && c.count < slots.length)) continue
        const have = slot.get() ? slot.get().count : 0
        const per = type === 0 ? Math.floor(c.count / slots.length) : (type === 1 ? 1 : maxOf(c))
        const n = Math.min(per + have, Math.min(maxOf(c), slot.max(c)))
        remaining -= n - have
        slot.set(withCount(c, n))
      }
      st.carried = withCount(c, remaining)
    } else reset()
  }

  // --- inventory helpers -------------------------------------------------------------------
  // vanilla Inventory.add: fill matching stacks (held slot, offhand, hotbar, main), then the
  // first empty slot (hotbar first); returns what did not fit
  function addToInventory (stack) {
    let left = stack.count
    const held = 36 + player.heldItemSlot
    const order = [held, 45, ...range(36, 45), ...range(9, 36)]
    for (const j of order) {
      const cur = inv.slots[j]
      if (left <= 0) break
      if (!stackable(cur, stack)) continue
      const n = Math.min(left, maxOf(cur) - cur.count)
      if (n > 0) { inv.updateSlot(j, withCount(cur, cur.count + n)); left -= n }
    }
    for (const j of [...range(36, 45), ...range(9, 36)]) {
      if (left <= 0) break
      if (inv.slots[j]) continue
      const n = Math.min(left, maxOf(stack))
      inv.updateSlot(j, withCount(stack, n))
      left -= n
    }
    return withCount(stack, left)
  }

  function give (stack) {
    const left = addToInventory(stack)
    if (left) dropItem(left)
  }

  function dropItem (stack) {
    if (!stack) return
    const { Vec3 } = need('vec3')
    // flying-squid keeps yaw as a protocol byte (1/256 turn); vanilla: x = -sin(yaw), z = cos(yaw).
    // Two blocks ahead, so the thrower does not pick it straight back up.
    const rad = (player.yaw || 0) * Math.PI * 2 / 256
    const at = player.position.plus(new Vec3(-Math.sin(rad), 0, Math.cos(rad)).scaled(2)).offset(0, 1, 0)
    // flying-squid's pick-up adds one item per entity, so one entity per item
    for (let i = 0; i < stack.count; i++) {
      serv.spawnObject(registry.entitiesByName.item.id, player.world, at, {
        velocity: new Vec3(0, 0, 0), itemId: stack.type, itemCount: 1, pickupTime: 500, deathTime: 5 * 60 * 1000
      })
    }
  }

  // --- sync with the client ------------------------------------------------------------------
  // vanilla AbstractContainerMenu.incrementStateId: one per packet, 15 bits
  function nextState (menu) { menu.stateId = (menu.stateId + 1) & 32767; return menu.stateId }

  function write (name, params) { if (st.ready) player._client.write(name, params) }

  function fullSync (menu) {
    const items = menu.slots.map((s) => s.get())
    menu.remote = items.map(copy)
    menu.remoteCarried = copy(st.carried)
    write('window_items', { windowId: menu.id, stateId: nextState(menu), items: items.map(notch), carriedItem: notch(st.carried) })
    if (menu.data) {
      menu.dataRemote = menu.data()
      menu.dataRemote.forEach((value, property) => write('craft_progress_bar', { windowId: menu.id, property, value }))
    }
  }

  function broadcast (menu) {
    menu.slots.forEach((s, i) => {
      const it = s.get()
      if (same(it, menu.remote[i])) return
      menu.remote[i] = copy(it)
      write('set_slot', { windowId: menu.id, stateId: nextState(menu), slot: i, item: notch(it) })
    })
    if (!same(st.carried, menu.remoteCarried)) {
      menu.remoteCarried = copy(st.carried)
      write('set_slot', { windowId: -1, stateId: nextState(menu), slot: -1, item: notch(st.carried) })
    }
    if (menu.data) {
      menu.data().forEach((value, property) => {
        if (menu.dataRemote[property] === value) return
        menu.dataRemote[property] = value
        write('craft_progress_bar', { windowId: menu.id, property, value })
      })
    }
  }

  function sendResult (menu) {
    menu.updateResult()
    const it = menu.slots[0].get()
    menu.remote[0] = copy(it)
    write('set_slot', { windowId: menu.id, stateId: nextState(menu), slot: 0, item: notch(it) })
  }

  function onClick (packet) {
    const menu = st.menu
    if (!packet || packet.windowId !== menu.id) return
    const stale = packet.stateId !== menu.stateId
    const gridBefore = menu.grid ? menu.gridKey() : null
    let gridChanged = false
    // no slot change is sent on its own until the client's prediction is recorded below
    st.clicking = true
    try {
      click(menu, packet.slot, packet.mouseButton, packet.mode)
      gridChanged = !!menu.grid && menu.gridKey() !== gridBefore
      if (gridChanged) menu.updateResult()
      // the client's own prediction is its view of the window now
      for (const { location, item } of (packet.changedSlots || []).slice(0, 128)) {
        if (Number.isInteger(location) && location >= 0 && location < menu.slots.length) menu.remote[location] = Item.fromNotch(item)
      }
      menu.remoteCarried = Item.fromNotch(packet.cursorItem)
      if (gridChanged) menu.remote[0] = copy(menu.slots[0].get()) // sent on its own, below
    } catch (err) {
      serv.emit('error', err)
    } finally {
      st.clicking = false
    }
    if (stale) fullSync(menu)
    else broadcast(menu)
    // Vanilla sends the result slot first, then the other changes. mineflayer waits for the
    // result slot and clicks on at once; sent last, the result carries the newest state id, so
    // that next click is not taken for a stale one (whose answer, the whole window, would then
    // overtake mineflayer's clicks in flight).
    if (gridChanged) sendResult(menu)
  }

  function close (notify) {
    const menu = st.menu
    if (notify && menu.id !== 0) write('close_window', { windowId: menu.id })
    if (st.carried) { const c = st.carried; st.carried = null; give(c) }
    menu.removed()
    if (menu.id !== 0) {
      // vanilla transferState: the inventory's view of the shared slots is what the client saw
      const offset = menu.slots.length - 36
      for (let k = 0; k < 36; k++) invMenu.remote[9 + k] = menu.remote[offset + k]
      invMenu.remoteCarried = menu.remoteCarried
    }
    st.menu = invMenu
    player.windowType = ''
    player.windowPos = undefined
    broadcast(invMenu)
  }

  const MENUS = {
    crafting: { build: tableMenu, title: 'container.crafting' },
    furnace: { build: furnaceMenu, title: 'container.furnace' },
    chest: { build: chestMenu, title: 'container.chest' }
  }

  function open (kind, position) {
    if (st.menu.id !== 0) close(true)
    player.windowId = (player.windowId || 0) % MAX_WINDOW_ID + 1
    const menu = MENUS[kind].build(player.windowId, position)
    st.menu = menu
    player.windowType = kind
    player.windowPos = position
    write('open_window', { windowId: menu.id, inventoryType: windows[menu.type].type, windowTitle: translated(serv, MENUS[kind].title) })
    fullSync(menu)
  }

  // --- wiring --------------------------------------------------------------------------------
  const client = player._client
  client.removeAllListeners('window_click')
  client.removeAllListeners('close_window')
  client.removeAllListeners('set_creative_slot')
  inv.removeAllListeners('updateSlot')
  client.on('window_click', onClick)
  client.on('close_window', ({ windowId } = {}) => { if (windowId === st.menu.id) close(false) })
  client.on('set_creative_slot', ({ slot, item } = {}) => {
    if (player.gameMode !== 1 || !Number.isInteger(slot) || slot < 1 || slot > 45) return
    inv.updateSlot(slot, Item.fromNotch(item))
  })
  // A change from outside a click (/give, a pick-up, eating, placing a block) reaches the client
  // at once, as flying-squid's own listener did, so it arrives before whatever the change causes
  // next (eating's entity status 9).
  inv.on('updateSlot', () => { if (st.ready && !st.clicking) broadcast(st.menu) })
  // armour and the held item shown to others (flying-squid's listener, kept)
  inv.on('updateSlot', (slot, oldItem, newItem) => {
    // 1.9+ equipment slots: main hand 0, off hand 1, feet 2, legs 3, chest 4, head 5
    const equipment = { 5: 5, 6: 4, 7: 3, 8: 2, 45: 1, [36 + player.heldItemSlot]: 0 }
    const slotId = equipment[slot]
    if (slotId === undefined) return
    player.setEquipment(slotId, newItem)
    if (serv.supportFeature('allEntityEquipmentInOne')) {
      player._writeOthersNearby('entity_equipment', { entityId: player.id, equipments: [{ slot: slotId, item: notch(newItem) }] })
    } else {
      player._writeOthersNearby('entity_equipment', { entityId: player.id, slot: slotId, item: notch(newItem) })
    }
  })
  player.collect = (entity) => {
    const left = addToInventory(new Item(entity.itemId, 1))
    if (left) return // no room: it stays on the ground
    entity._writeOthersNearby('collect', { collectedEntityId: entity.id, collectorEntityId: player.id, pickupItemCount: 1 })
    player.playSoundAtSelf?.('random.pop')
    entity.destroy()
  }

  let checking = false
  const onTick = async (delta, count) => {
    if (!st.ready || checking) return
    const menu = st.menu
    broadcast(menu)
    if (menu.id !== 0 && count % 10 === 0) {
      checking = true
      try { if (!(await menu.stillValid())) { if (st.menu === menu) close(true) } } catch (err) { /* world gone */ }
      checking = false
    }
  }
  serv.on('tick', onTick)
  player.once('spawned', () => { st.ready = true; fullSync(invMenu) })
  client.once('end', () => {
    serv.removeListener('tick', onTick)
    st.menu.gone?.()
  })

  player.emilWindows = {
    open,
    give,
    clear: () => {
      if (st.menu.id !== 0) close(true)
      st.carried = null
      for (let j = 0; j < inv.slots.length; j++) if (inv.slots[j]) inv.updateSlot(j, null)
    }
  }
}

function range (a, b) { const out = []; for (let i = a; i < b; i++) out.push(i); return out }

module.exports = { install, installPlayer }
