'use strict'
// Named blueprints for the build tool: block offsets from an origin (the block where the builder
// stands, or where the structure's base goes), listed bottom-up so every block has a placed
// neighbour to go against. Pure data; the names are the Build tool's `blueprint` choices
// (emil/world/making.py), checked against this list by a unit test.
const BLUEPRINTS = {
  // Walls two high on all four sides of the origin and a roof over it: the emergency box to wait
  // out a night in (mobs do not pass diagonally, so the corners stay open). The roof's first
  // block sits on a wall so the one above the builder's head has something to go against.
  shelter: () => [
    [1, 0, 0], [-1, 0, 0], [0, 0, 1], [0, 0, -1],
    [1, 1, 0], [-1, 1, 0], [0, 1, 1], [0, 1, -1],
    [1, 2, 0], [0, 2, 0]
  ],
  // A column `height` blocks high on the origin (a landmark, or a step up).
  pillar: ({ height = 3 } = {}) => Array.from({ length: height }, (_, y) => [0, y, 0])
}

module.exports = { BLUEPRINTS }
