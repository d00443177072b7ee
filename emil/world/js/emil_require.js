'use strict'
// Require Emil's JS dependencies by absolute path from the directory `npm ci` installed them in
// (emil.world.setup passes it as EMIL_JS_MODULES), never by bare name: nothing may resolve to,
// or install into, another node_modules.
const path = require('path')

function modulesDir () {
  return process.env.EMIL_JS_MODULES || path.join(__dirname, 'node_modules')
}

function need (name) {
  return require(path.join(modulesDir(), name))
}

module.exports = { need, modulesDir }
