'use strict'
// ESLint's flat config for Emil's bot module, the embedded server's plugins and the scripted
// player (run by tools/lint_js.py, which .ci/run calls): the recommended rules, Node's globals,
// CommonJS. Style is not linted (the files follow `standard`'s layout by hand); bugs are.
const js = require('@eslint/js')
const globals = require('globals')

module.exports = [
  { ignores: ['node_modules/**'] },
  js.configs.recommended,
  {
    files: ['**/*.js'],
    languageOptions: {
      ecmaVersion: 2024,
      sourceType: 'commonjs',
      globals: { ...globals.node }
    },
    rules: {
      // an unused catch binding or a trailing `_`-named argument says "deliberately ignored"
      'no-unused-vars': ['error', { args: 'after-used', argsIgnorePattern: '^_', caughtErrors: 'none' }]
    }
  }
]
