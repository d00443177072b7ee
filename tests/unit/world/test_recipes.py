"""The recipe families the embedded server matches and the craft tool plans from (js/emil_recipes.js).

Pure functions over minecraft-data, run in Node: a tag ingredient accepts any member in each cell
(vanilla), a cell does not accept what no variant puts there, shapes match mirrored, shapeless
recipes in any order.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from emil.world.setup import JS_SOURCE_DIR, node_bin

_SCRIPT = """
const reg = require(process.argv[2] + '/node_modules/minecraft-data')('1.20.4')
const { createCrafting, craftingFamilies, needsTable } = require(process.argv[2] + '/emil_recipes.js')
const { match } = createCrafting(reg)
const grid = (names) => names.map((n) => (n ? { type: reg.itemsByName[n].id } : null))
const name = (r) => (r ? `${r.count} ${reg.items[r.id].name}` : null)
const cases = JSON.parse(process.argv[1])
const out = cases.map(([cells, width]) => name(match(grid(cells), width)))
const fam = craftingFamilies(reg).byResult.get(reg.itemsByName.wooden_pickaxe.id)
out.push(fam.map(needsTable))
console.log(JSON.stringify(out))
"""

_ = None
CASES: list[tuple[list[str | None], int, str | None]] = [
    # two kinds of planks in one pickaxe (minecraft-data lists #planks one kind at a time)
    (["oak_planks", "birch_planks", "oak_planks", _, "stick", _, _, "stick", _], 3, "1 wooden_pickaxe"),
    # cobblestone is not a plank: no cell of the family accepts it
    (["oak_planks", "cobblestone", "oak_planks", _, "stick", _, _, "stick", _], 3, None),
    # stone tools take any #stone_tool_materials, mixed too
    (["cobblestone", "blackstone", "cobbled_deepslate", _, "stick", _, _, "stick", _], 3, "1 stone_pickaxe"),
    # an axe as listed, and mirrored and moved right with mixed planks (it faces either way)
    (["oak_planks", "oak_planks", _, "oak_planks", "stick", _, _, "stick", _], 3, "1 wooden_axe"),
    ([_, "spruce_planks", "oak_planks", _, "stick", "birch_planks", _, "stick", _], 3, "1 wooden_axe"),
    # no recipe has this shape
    (["oak_planks", _, _, _, "stick", _, _, _, "oak_planks"], 3, None),
    # sticks from two planks of two kinds; the bamboo recipe makes 1, not 4
    (["oak_planks", _, "jungle_planks", _], 2, "4 stick"),
    (["bamboo", _, "bamboo", _], 2, "1 stick"),
    # a torch takes coal or charcoal
    (["charcoal", _, "stick", _], 2, "4 torch"),
    # shapeless, any order and place
    ([_, "red_dye", _, "blue_dye"], 2, "2 purple_dye"),
    (["blue_dye", "red_dye", _, _], 2, "2 purple_dye"),
    ([_, _, _, _], 2, None),
]


def test_families_match_as_vanilla_does() -> None:
    cases = [[cells, width] for cells, width, _ in CASES]
    out = subprocess.run(
        [str(node_bin()), "-e", _SCRIPT, json.dumps(cases), str(JS_SOURCE_DIR)],
        capture_output=True, text=True, check=True, timeout=60,
    )
    *results, tables = json.loads(out.stdout)
    for (cells, _width, expected), got in zip(CASES, results, strict=True):
        assert got == expected, (cells, got)
    assert tables == [True]  # one pickaxe family (all plank kinds), a 3x3 recipe


@pytest.mark.parametrize("module", ["emil_recipes.js", "emil_smelting.js", "emil_blueprints.js"])
def test_shared_data_modules_load_without_a_server(module: str) -> None:
    script = "require(process.argv[1]); console.log('ok')"
    out = subprocess.run([str(node_bin()), "-e", script, str(JS_SOURCE_DIR / module)],
                         capture_output=True, text=True, check=True, timeout=30)
    assert out.stdout.strip() == "ok"
