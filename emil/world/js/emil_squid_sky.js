'use strict'
// The sky for flying-squid 1.12: the day/night clock and the weather, sent as vanilla sends them.
//
// flying-squid's /weather sent game_state_change reason 2 for rain and 1 for clear: the protocol
// (and mineflayer) read 1 as start_raining and 2 as stop_raining, so a client saw the opposite
// weather, or none. Vanilla announces rain with start_raining and then moves the rain level by
// 0.01 a tick (rain_level_change, thunder_level_change), and tells a joining player the current
// weather. Its update_time also always said the world's age was 0; vanilla sends the real age and a
// negative time of day when the daylight cycle is stopped.
//
// flying-squid's clock (plugins/daycycle.js) read the time in a tick, awaited its 'changeTime'
// behaviour's hooks, then wrote the time read plus 20: whatever set the time in between, in the
// same tick, was undone. The beds skip the night in a tick; one time in twenty (the ticks where
// the clock moves) the morning came and went back to the night it had replaced, right after
// everybody woke. Here the clock moves in the tick itself, read and written with no await between.
//
//   /weather <clear|rain|thunder> [seconds]   (the duration is how long it lasts, then clear)
//   /time set|add <ticks|day|noon|night|midnight>, /time query   (flying-squid's, plus noon/midnight)
const LEVEL_STEP = 0.01 // per tick, vanilla
const START_RAINING = 1
const STOP_RAINING = 2
const RAIN_LEVEL = 7
const THUNDER_LEVEL = 8

function long (n) {
  const big = BigInt.asUintN(64, BigInt(Math.trunc(n)))
  return [Number(BigInt.asIntN(32, big >> 32n)), Number(BigInt.asIntN(32, big & 0xffffffffn))]
}

function install (serv) {
  const weather = { raining: false, thundering: false, rain: 0, thunder: 0, until: null }
  serv.weather = weather

  function timePacket () {
    const time = serv.doDaylightCycle ? serv.time : -Math.max(1, serv.time)
    return { age: long(serv.tickCount || 0), time: long(time) }
  }
  serv.setTime = (time) => {
    serv.time = ((Math.trunc(time) % 24000) + 24000) % 24000
    serv._writeAll('update_time', timePacket())
  }

  function state (to, reason, value) {
    const packet = { reason, gameMode: value }
    if (to) to._client.write('game_state_change', packet)
    else serv._writeAll('game_state_change', packet)
  }

  serv.setWeather = (kind, seconds) => {
    const wasRaining = weather.raining
    weather.raining = kind !== 'clear'
    weather.thundering = kind === 'thunder'
    weather.until = seconds ? Date.now() + seconds * 1000 : null
    if (wasRaining !== weather.raining) state(null, weather.raining ? START_RAINING : STOP_RAINING, 0)
  }

  // flying-squid's clock asks its 'changeTime' behaviour every 20 ticks; the hook runs in the tick
  // (the behaviour's first await comes after it): the hook moves the clock and cancels the
  // stale write, quietly (no plugin sees a cancelled change).
  serv.on('changeTime_cancel', (change, cancel) => {
    cancel(false, true)
    serv.setTime(serv.time + (change.newTime - change.old))
  })

  serv.on('tick', () => {
    if (weather.until !== null && Date.now() >= weather.until) serv.setWeather('clear')
    const move = (key, target, reason) => {
      const next = Math.max(0, Math.min(1, weather[key] + (target > weather[key] ? LEVEL_STEP : -LEVEL_STEP)))
      if (Math.abs(weather[key] - target) < 1e-9) return
      weather[key] = Math.abs(next - target) < LEVEL_STEP / 2 ? target : next
      state(null, reason, weather[key])
    }
    move('rain', weather.raining ? 1 : 0, RAIN_LEVEL)
    move('thunder', weather.thundering ? 1 : 0, THUNDER_LEVEL)
  })

  serv.once('asap', () => {
    // registered after flying-squid's own /weather and /time so they replace them
    serv.commands.add({
      base: 'weather',
      info: 'Sets the weather.',
      usage: '/weather <clear|rain|thunder> [seconds]',
      op: true,
      parse (str) {
        const m = str.match(/^(clear|rain|thunder)(?: (\d{1,7}))?$/)
        return m ? { kind: m[1], seconds: m[2] ? parseInt(m[2], 10) : null } : false
      },
      action ({ kind, seconds }) {
        serv.setWeather(kind, seconds)
        return `Set the weather to ${kind}`
      }
    })
    const named = { day: 1000, noon: 6000, night: 13000, midnight: 18000 }
    serv.commands.add({
      base: 'time',
      info: 'to change a time',
      usage: '/time <add|set> <ticks|day|noon|night|midnight> | /time query',
      op: true,
      parse (str) {
        const m = str.match(/^(add|set) (\d{1,9}|day|noon|night|midnight)$|^(query)$/)
        if (!m) return false
        if (m[3]) return { action: 'query' }
        return { action: m[1], value: named[m[2]] ?? parseInt(m[2], 10) }
      },
      action ({ action, value }) {
        if (action === 'query') return `The time is ${serv.time}`
        serv.setTime(action === 'set' ? value : serv.time + value)
        return `Set the time to ${serv.time}`
      }
    })
  })
}

function installPlayer (player, serv) {
  player.once('spawned', () => {
    player._client.write('update_time', { age: long(serv.tickCount || 0), time: long(serv.doDaylightCycle ? serv.time : -Math.max(1, serv.time)) })
    const w = serv.weather
    if (!w || (!w.raining && w.rain === 0)) return
    if (w.raining) state(player, START_RAINING)
    player._client.write('game_state_change', { reason: RAIN_LEVEL, gameMode: w.rain })
    player._client.write('game_state_change', { reason: THUNDER_LEVEL, gameMode: w.thunder })
  })
  function state (to, reason) { to._client.write('game_state_change', { reason, gameMode: 0 }) }
}

module.exports = { install, installPlayer }
