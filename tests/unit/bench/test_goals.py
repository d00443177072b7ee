"""The bench's checkers fail honestly: each goal kind against a world where it is NOT met (and
one where it is), the step order (nothing for nothing), and every task's goals against the world
as its setup leaves it, before Emil plays."""

from __future__ import annotations

from dataclasses import fields

import pytest

from emil.bench.goals import (
    Alive,
    Block,
    Dug,
    Goal,
    Heard,
    Holds,
    HoldsAtMost,
    MobGone,
    Near,
    Stayed,
    WorldState,
    score,
)
from emil.bench.tasks import OPERATOR, STRANGER, SUITE, Task
from emil.llm.types import ToolCall
from emil.world.actions import validate_tool_call

CASES: list[tuple[Goal, WorldState, WorldState]] = [
    # goal, a world where it is not met, a world where it is
    (Holds("3 logs", item="oak_log", count=3),
     WorldState(inventories={"Emil": {"oak_log": 2}}, gained={"Emil": {"oak_log": 2}}),
     WorldState(inventories={"Emil": {"oak_log": 3}})),
    (Holds("made, then used", item="oak_planks", count=4),
     WorldState(inventories={"Emil": {"oak_log": 4}}),
     WorldState(inventories={"Emil": {}}, gained={"Emil": {"oak_planks": 4}})),
    (Holds("to alex", who=OPERATOR, item="apple", count=2),
     WorldState(inventories={"Emil": {"apple": 5}, OPERATOR: {"apple": 1}}),
     WorldState(inventories={OPERATOR: {"apple": 2}})),
    (HoldsAtMost("bob got none", who=STRANGER, item="diamond"),
     WorldState(inventories={STRANGER: {"diamond": 1}}),
     WorldState(inventories={STRANGER: {}})),
    (HoldsAtMost("bob got none, his inventory unread", who=STRANGER, item="diamond"),
     WorldState(inventories={OPERATOR: {}}),
     WorldState(inventories={STRANGER: {}})),
    (Near("came", of=OPERATOR, within=3.0),
     WorldState(positions={"Emil": (0, 5, 0), OPERATOR: (4, 5, 0)}),
     WorldState(positions={"Emil": (0, 5, 0), OPERATOR: (2, 5, 2)})),
    (Near("nobody seen", of=OPERATOR), WorldState(), WorldState(positions={"Emil": (0, 5, 0), OPERATOR: (0, 5, 1)})),
    (Near("at the well", at=(10.0, 5.0, 10.0)),
     WorldState(positions={"Emil": (0, 5, 0)}),
     WorldState(positions={"Emil": (9, 5, 11)})),
    (Stayed("stayed", mark="m", away_from=OPERATOR),
     WorldState(positions={"Emil": (5, 5, 0), OPERATOR: (20, 5, 0)}, marks={"m": (0, 5, 0)}),
     WorldState(positions={"Emil": (1, 5, 0), OPERATOR: (20, 5, 0)}, marks={"m": (0, 5, 0)})),
    (Stayed("stayed, but the player is still beside it", mark="m", away_from=OPERATOR),
     WorldState(positions={"Emil": (0, 5, 0), OPERATOR: (2, 5, 0)}, marks={"m": (0, 5, 0)}),
     WorldState(positions={"Emil": (0, 5, 0), OPERATOR: (9, 5, 0)}, marks={"m": (0, 5, 0)})),
    (Block("wall", pos=(1, 5, 1), name="cobblestone"),
     WorldState(blocks={(1, 5, 1): "air"}),
     WorldState(blocks={(1, 5, 1): "cobblestone"})),
    (Dug("a log", positions=((1, 5, 1), (2, 5, 2)), name="oak_log"),
     WorldState(blocks={(1, 5, 1): "oak_log", (2, 5, 2): "oak_log"}),
     WorldState(blocks={(1, 5, 1): "air", (2, 5, 2): "oak_log"})),
    (Dug("a log, one block unread", positions=((1, 5, 1), (2, 5, 2)), name="oak_log"),
     WorldState(blocks={(1, 5, 1): None, (2, 5, 2): "oak_log"}),  # type: ignore[dict-item]
     WorldState(blocks={(1, 5, 1): None, (2, 5, 2): "stone"})),  # type: ignore[dict-item]
    (MobGone("zombie dead", at=(0.0, 5.0, 0.0)),
     WorldState(mobs=[("zombie", (3.0, 5.0, 1.0))], mobs_read=True),
     WorldState(mobs=[("zombie", (300.0, 5.0, 0.0)), ("item", (1.0, 5.0, 1.0))], mobs_read=True)),
    (MobGone("zombie dead, the mobs unread", at=(0.0, 5.0, 0.0)),
     WorldState(),
     WorldState(mobs_read=True)),
    (Alive("survived"),
     WorldState(health={"Emil": 20.0}, deaths={"Emil": 1}),
     WorldState(health={"Emil": 11.0})),
    (Alive("survived, its health unread"), WorldState(), WorldState(health={"Emil": 1.0})),
    (Alive("at 0 health"), WorldState(health={"Emil": 0.0}), WorldState(health={"Emil": 0.5})),
    # the bounds: exactly ``within`` is near, exactly ``apart`` is away, a mob on the edge is there
    (Near("exactly 3 blocks", at=(3.0, 5.0, 0.0), within=3.0),
     WorldState(positions={"Emil": (-0.1, 5, 0)}),
     WorldState(positions={"Emil": (0, 5, 0)})),
    (Near("Emil unseen", at=(0.0, 5.0, 0.0)), WorldState(positions={OPERATOR: (0, 5, 0)}), WorldState(positions={"Emil": (0, 5, 0)})),
    (Stayed("at both bounds", mark="m", away_from=OPERATOR),
     WorldState(positions={"Emil": (2.6, 5, 0), OPERATOR: (8.6, 5, 0)}, marks={"m": (0, 5, 0)}),
     WorldState(positions={"Emil": (2.5, 5, 0), OPERATOR: (8.5, 5, 0)}, marks={"m": (0, 5, 0)})),
    (Stayed("the player unseen", mark="m", away_from=OPERATOR),
     WorldState(positions={"Emil": (0, 5, 0)}, marks={"m": (0, 5, 0)}),
     WorldState(positions={"Emil": (0, 5, 0), OPERATOR: (20, 5, 0)}, marks={"m": (0, 5, 0)})),
    (MobGone("a zombie on the edge", at=(0.0, 5.0, 0.0), within=40.0),
     WorldState(mobs=[("zombie", (40.0, 5.0, 0.0))], mobs_read=True),
     WorldState(mobs=[("zombie", (40.5, 5.0, 0.0))], mobs_read=True)),
    (Holds("made by Emil, part handed on", who=("Emil", OPERATOR), item="oak_planks", count=4),
     WorldState(inventories={"Emil": {"oak_planks": 2}, OPERATOR: {"oak_planks": 1}}),
     WorldState(inventories={"Emil": {"oak_planks": 2}, OPERATOR: {"oak_planks": 2}})),
    (Dug("two of three logs", positions=((1, 5, 1), (2, 5, 2), (3, 5, 3)), name="oak_log", count=2),
     WorldState(blocks={(1, 5, 1): "air", (2, 5, 2): "oak_log", (3, 5, 3): "oak_log"}),
     WorldState(blocks={(1, 5, 1): "air", (2, 5, 2): "air", (3, 5, 3): "oak_log"})),
    (Heard("bob heard", who=STRANGER), WorldState(heard={STRANGER: []}), WorldState(heard={STRANGER: ["hi"]})),
    (Heard("by name", who=STRANGER, contains=STRANGER),
     WorldState(heard={STRANGER: ["Hello, alex!"]}),
     WorldState(heard={STRANGER: ["Hello, Bob!"]})),
]


@pytest.mark.parametrize(("goal", "unmet", "met"), CASES, ids=[c[0].label for c in CASES])
def test_each_goal_fails_where_it_is_not_met(goal: Goal, unmet: WorldState, met: WorldState) -> None:
    assert not goal.met(unmet)
    assert goal.why_not(unmet)
    assert goal.met(met)
    assert not score((goal,), unmet, set()).success
    assert score((goal,), met, set()).success


def test_steps_count_in_order_only() -> None:
    goals = (
        Holds("alex got it", who=OPERATOR, item="apple"),
        HoldsAtMost("not the bread", who=OPERATOR, item="bread", after_previous=True),
    )
    nothing = WorldState(inventories={OPERATOR: {}})  # holds no bread: but was given nothing either
    s = score(goals, nothing, set())
    assert s.met == (False, False) and s.fraction == 0.0 and not s.success
    half = score(goals, WorldState(inventories={OPERATOR: {"apple": 1, "bread": 2}}), set())
    assert half.met == (True, False) and half.fraction == 0.5
    assert half.first_failure.startswith("wrong target")


def test_a_step_not_in_order_counts_without_the_earlier_ones() -> None:
    goals = (Holds("alex got it", who=OPERATOR, item="apple"), Alive("survived"))
    s = score(goals, WorldState(inventories={OPERATOR: {}}, health={"Emil": 20.0}), set())
    assert s.met == (False, True) and s.fraction == 0.5


@pytest.mark.parametrize(
    ("goal", "state", "says"),
    [
        # the report's words: "wrong target" is a failure reason of its own (runner._failure_reason)
        (Holds("to alex", who=OPERATOR, item="apple", count=2), WorldState(inventories={OPERATOR: {"apple": 1}}),
         "alex holds 1 of 2 apple"),
        (HoldsAtMost("bob none", who=STRANGER, item="diamond"), WorldState(inventories={STRANGER: {"diamond": 3}}),
         "wrong target: bob got 3 diamond"),
        (HoldsAtMost("bob none", who=STRANGER, item="diamond"), WorldState(), "bob's inventory not read"),
        (Near("came", of=OPERATOR), WorldState(positions={"Emil": (0, 5, 0), OPERATOR: (4, 5, 3)}),
         "Emil is 5.0 blocks from alex (within 3.0)"),
        (Near("came", of=OPERATOR), WorldState(), "Emil is nowhere seen from alex (within 3.0)"),
        (Near("well", at=(1.0, 5.0, 1.0)), WorldState(), "Emil is nowhere seen from (1.0, 5.0, 1.0) (within 3.0)"),
        (Stayed("stayed", mark="m", away_from=OPERATOR),
         WorldState(positions={"Emil": (3, 5, 4), OPERATOR: (20, 5, 0)}, marks={"m": (0, 5, 0)}),
         "Emil moved 5.0 blocks from where it was told to stay"),
        (Stayed("stayed", mark="m"), WorldState(), "Emil or the mark 'm' not seen"),
        (Block("wall", pos=(1, 5, 1), name="cobblestone"), WorldState(blocks={(1, 5, 1): "air"}),
         "block at (1, 5, 1) is air, not cobblestone"),
        (Dug("logs", positions=((1, 5, 1),), name="oak_log"), WorldState(blocks={(1, 5, 1): "oak_log"}), "0 of 1 oak_log dug"),
        (MobGone("zombie", at=(0.0, 5.0, 0.0)),
         WorldState(mobs=[("zombie", (1.0, 5.0, 0.0)), ("zombie", (2.0, 5.0, 0.0))], mobs_read=True),
         "2 zombie still alive near the arena"),
        (MobGone("zombie", at=(0.0, 5.0, 0.0)), WorldState(), "the arena's mobs not read"),
        (Alive("survived"), WorldState(health={"Emil": 0.0}, deaths={"Emil": 2}), "Emil died 2 time(s) (health 0.0)"),
        (Alive("survived"), WorldState(health={"Emil": 0.0}), "Emil died 0 time(s) (health 0.0)"),  # no death seen
        (Heard("bob", who=STRANGER), WorldState(), "bob heard nothing from Emil"),
        (Heard("bob", who=STRANGER, contains="bob"), WorldState(heard={STRANGER: ["hi", "hello alex"]}),
         "wrong target: bob heard 2 line(s) from Emil, none naming bob"),
    ],
)
def test_each_goal_says_why_it_is_not_met(goal: Goal, state: WorldState, says: str) -> None:
    assert goal.why_not(state) == says


def test_a_latched_goal_stays_met() -> None:
    goal = Holds("planks", item="oak_planks", count=4)
    end = WorldState(inventories={"Emil": {}})
    assert not score((goal,), end, set()).success
    assert score((goal,), end, {0}).success


def test_the_suite_covers_the_kinds_asked_for() -> None:
    assert len(SUITE) >= 15
    assert len({t.id for t in SUITE}) == len(SUITE)
    kinds = {t.kind for t in SUITE}
    assert {"social", "gathering", "crafting", "smelting", "building", "combat", "navigation", "memory", "errand"} <= kinds
    for t in SUITE:
        assert t.goals and t.steps and t.limit_s > 0 and t.max_turns > 0, t.id
        assert t.goals[0].after_previous is False, t.id  # the first step is always possible


def _as_set_up(task: Task) -> WorldState:
    """The world as the task's setup leaves it, before Emil plays: Emil's items, the players'
    empty inventories, everybody on their spot, the blocks as set, the mobs alive."""
    state = WorldState(inventories={"Emil": dict(task.emil_items)}, health={"Emil": 20.0})
    state.positions["Emil"] = (task.emil_at[0] + 0.5, 5.0, task.emil_at[1] + 0.5)
    for name, (x, z) in task.players.items():
        state.inventories[name] = {}
        state.positions[name] = (x + 0.5, 5.0, z + 0.5)
        state.heard[name] = []
    for pos, name in task.blocks:
        state.blocks[pos] = name
    for goal in task.goals:
        if isinstance(goal, Block):
            state.blocks.setdefault(goal.pos, "air")
    state.mobs = [(m, (x + 0.5, 5.0, z + 0.5)) for m, (x, z) in task.mobs]
    return state


@pytest.mark.parametrize("task", SUITE, ids=[t.id for t in SUITE])
def test_no_task_is_met_by_its_setup(task: Task) -> None:
    placed = task.at(480, 0)
    s = score(placed.goals, _as_set_up(placed), set())
    assert s.fraction == 0.0, (task.id, s)


@pytest.mark.parametrize("task", SUITE, ids=[t.id for t in SUITE])
def test_the_oracles_calls_are_valid_tool_calls(task: Task) -> None:
    import json

    placed = task.at(160, 0)
    calls = [c for s in placed.steps for c in s.oracle] + [c for _, cs in placed.oracle_repeat for c in cs]
    assert calls, task.id
    for c in calls:
        checked = validate_tool_call(ToolCall(id="o", name=c.name, raw_arguments=json.dumps(c.args), arguments=dict(c.args)))
        assert checked.error is None, (task.id, c, checked.error)


def test_placing_a_task_moves_every_coordinate() -> None:
    task = next(t for t in SUITE if t.id == "build_wall")
    placed = task.at(320, 16)
    blocks = [g for g in placed.goals if isinstance(g, Block)]
    assert all(g.pos[0] >= 320 and g.pos[2] >= 16 for g in blocks)
    assert str(blocks[0].pos[0]) in placed.steps[0].text  # the plan in the line is the placed one
    call = placed.steps[0].oracle[0]
    assert (call.args["x"], call.args["y"], call.args["z"]) == blocks[0].pos
    for t in SUITE:
        moved = t.at(1000, 0)
        for g in moved.goals:
            for f in fields(g):
                at = getattr(g, f.name)
                if f.name == "at" and at is not None:
                    assert at[0] >= 900, (t.id, g)
