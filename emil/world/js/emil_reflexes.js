'use strict'
// Reflexes: keep Emil alive while the model thinks. No LLM in the loop. Each one is switchable
// (ctl.reflexes.<name>) and reports what it did as a `reflex` event so the model learns of it.

const DEFAULT_REFLEXES = {
  defend: true, // hit back at an attacker within reach
  flee: true, // run from the threat when health is low
  eat: true, // eat when hungry and food is in the inventory
  unstuck: true, // pathing makes no progress -> jump and step aside, then resume
  fleeHealth: 6, // flee at or below this health (of 20)
  eatBelowFood: 14, // eat at or below this food level (of 20)
  defendMs: 6000, // keep fighting back this long after the last hit
  defendReach: 4.5
}

function installReflexes (ctl, bot) {
  const emit = (reflex, detail) => ctl.emit('reflex', { reflex, detail })
  const { Vec3, goals } = ctl.lib
  // The reflex's own fight, while it lasts: whom it fights, until when, its watch timer. The
  // fight is the reflex's only while mineflayer-pvp's target is still that attacker and no job
  // has started since: ending it then stops pvp (at once: pvp.stop()'s graceful stop would leave
  // the pathfinder's stop pending for up to 5 s, wiping the next goal anyone sets), ending it
  // otherwise leaves pvp alone. (A watch that stopped pvp whatever it was doing cut short the
  // fight a player ordered right after Emil defended himself: the attack tool landed 0 hits.)
  let fight = null
  let fleeing = false
  let eating = false

  function threatName (e) { return e ? (e.username || e.name || 'something') : 'something' }

  function endFight (reason) {
    if (!fight) return
    const { attacker, timer } = fight
    fight = null
    clearInterval(timer)
    if (reason !== 'taken over' && bot.pvp && bot.pvp.target === attacker) {
      try { bot.pvp.forceStop() } catch (e) { /* already stopped */ }
    }
  }

  function defend (attacker) {
    const r = ctl.reflexes
    if (!r.defend || !attacker || !attacker.isValid || !bot.entity) return false
    if (bot.health <= r.fleeHealth) return false
    if (attacker.position.distanceTo(bot.entity.position) > r.defendReach) return false
    // a job (the attack tool) already fights this attacker: it goes on, the reflex keeps out
    if (ctl.job && !fight && bot.pvp && bot.pvp.target === attacker) return false
    // The first blow is immediate (no path planning): that is the reaction the benchmark times.
    bot.lookAt(attacker.position.offset(0, (attacker.height || 1.6) * 0.8, 0), true).catch(() => {})
    bot.attack(attacker)
    if (fight) {
      fight.until = Date.now() + r.defendMs
      return true
    }
    if (ctl.job) ctl.stopJob('self-defence')
    emit('defend', `hit back at ${threatName(attacker)}`)
    try { bot.pvp.attack(attacker) } catch (e) { /* keep the single blow */ }
    const timer = setInterval(() => {
      if (!fight || fight.timer !== timer) { clearInterval(timer); return }
      if (!bot.pvp || bot.pvp.target !== attacker) { endFight('taken over'); return }
      const gone = !attacker.isValid || !bot.entity || attacker.position.distanceTo(bot.entity.position) > 16
      if (Date.now() > fight.until || gone || fleeing) endFight('over')
    }, 250)
    fight = { attacker, until: Date.now() + r.defendMs, timer }
    return true
  }

  // A job that starts takes the body over: the reflex's fight ends (its pvp stopped), so the job
  // (an operator's attack on the same player, a walk) starts from a still body.
  ctl.hooks.jobStart.push(() => endFight('pre-empted'))

  function flee (attacker) {
    const r = ctl.reflexes
    if (!r.flee || fleeing || !bot.entity || bot.health > r.fleeHealth || bot.health <= 0) return
    const threat = attacker || ctl.findAttacker()
    const me = bot.entity.position
    let away
    if (threat && threat.position) {
      away = me.minus(threat.position)
      away.y = 0
      if (away.norm() < 0.01) away = new Vec3(1, 0, 0)
    } else {
      const a = Math.random() * Math.PI * 2
      away = new Vec3(Math.cos(a), 0, Math.sin(a))
    }
    away = away.normalize().scaled(14)
    const target = me.plus(away)
    fleeing = true
    if (ctl.job) ctl.stopJob('fleeing at low health')
    try { bot.pvp.forceStop() } catch (e) { /* not fighting */ }
    emit('flee', `health ${Math.round(bot.health)}: running from ${threatName(threat)}`)
    bot.pathfinder.goto(new goals.GoalNearXZ(target.x, target.z, 2))
      .catch(() => {})
      .finally(() => { fleeing = false })
    setTimeout(() => { fleeing = false }, 8000)
  }

  function eat () {
    const r = ctl.reflexes
    if (!r.eat || eating || !bot.entity || bot.food > r.eatBelowFood) return
    if (fight || fleeing) return
    const food = bestFood(bot)
    if (!food) return
    eating = true
    emit('eat', `food ${bot.food}: eating ${food.name}`)
    bot.equip(food, 'hand')
      .then(() => bot.consume())
      .catch(() => {})
      .finally(() => { eating = false })
  }

  ctl.hooks.damage.push((attacker) => {
    if (bot.health <= ctl.reflexes.fleeHealth) flee(attacker)
    else defend(attacker)
  })
  ctl.hooks.health.push(() => {
    if (bot.health <= ctl.reflexes.fleeHealth) flee(null)
    eat()
  })

  // Unstuck: while a path goal is set, less than 0.3 blocks of progress in 3 s means stuck.
  let last = null
  let lastAt = 0
  let lastUnstuck = 0
  const unstuckTimer = setInterval(() => {
    if (!ctl.reflexes.unstuck || !bot.entity || !bot.pathfinder) return
    const moving = bot.pathfinder.isMoving() || bot.pathfinder.goal
    const now = Date.now()
    if (!moving) { last = null; return }
    if (!last) { last = bot.entity.position.clone(); lastAt = now; return }
    if (bot.entity.position.distanceTo(last) > 0.3) { last = bot.entity.position.clone(); lastAt = now; return }
    if (now - lastAt < 3000 || now - lastUnstuck < 3000 || bot.pathfinder.isMining()) return
    lastUnstuck = now
    const goal = bot.pathfinder.goal
    emit('unstuck', 'no progress for 3 s: jumping and stepping aside')
    const dirs = ['forward', 'back', 'left', 'right']
    const dir = dirs[Math.floor(Math.random() * dirs.length)]
    bot.setControlState('jump', true)
    bot.setControlState(dir, true)
    setTimeout(() => {
      bot.setControlState('jump', false)
      bot.setControlState(dir, false)
      if (goal && bot.pathfinder.goal === goal) bot.pathfinder.setGoal(goal, true)
      last = null
    }, 700)
  }, 500)
  bot.once('end', () => { clearInterval(unstuckTimer); endFight('over') })

  ctl.reflexState = () => ({ fleeing, eating, defending: fight !== null })
}

function bestFood (bot) {
  const foods = bot.registry.foodsByName || {}
  let best = null
  for (const item of bot.inventory.items()) {
    const f = foods[item.name]
    if (!f) continue
    if (['rotten_flesh', 'spider_eye', 'poisonous_potato', 'pufferfish', 'chorus_fruit'].includes(item.name)) continue
    const reserved = bot.emilReserved && bot.emilReserved[item.name]
    if (reserved && bot.inventory.count(item.type) <= reserved) continue
    if (!best || f.foodPoints > best.points) best = { item, points: f.foodPoints }
  }
  return best ? best.item : null
}

module.exports = { installReflexes, DEFAULT_REFLEXES, bestFood }
