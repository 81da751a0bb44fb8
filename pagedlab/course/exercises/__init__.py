"""The exercises, one module per lab (``labNN.py``), and their solution cells (``solutions/``).

How to add an exercise (the whole recipe; see ``docs/instructor_guide.md`` for the why)
--------------------------------------------------------------------------------------------
1. Write the solution cell as ``solutions/<lab>_<slug>.py``: first line ``# EXERCISE <lab>.<slug>``,
   then the imports it needs, the signature and docstring, and the body between
   ``### BEGIN SOLUTION`` / ``### END SOLUTION`` (the part ``pagedlab labs build`` stubs out).
   Paste exactly this text as the exercise cell of ``solutions/NN_*.ipynb``.
2. In ``labNN.py`` (import it below if new) register the exercise::

       EX = register(Exercise("04.schedule_step", "schedule_step", "one step of continuous batching",
                              reference=None,        # None: the object the solution cell defines
                              render=my_render))     # optional: (state, expected_state, path) -> svg

3. Add tests. A test drives the object and records what it sees; the framework runs it on the
   reference too and reports the first difference, with the step and your hint::

       @EX.test("admits waiting requests in arrival order")
       def _(schedule_step, rec):
           world = make_world(seed=0)                 # deterministic inputs only
           rec.step("schedule_step(running, waiting, kv, max_num_seqs=2)")
           got = schedule_step(world.running, world.waiting, world.kv, 2)
           rec.observe("tokens scheduled", dict(got), hint="running requests come first")
           rec.state(world.snapshot())                # drawn by `render` if this step fails

   ``rec.observe(..., tol=1e-9)`` compares numbers approximately, ``at_most=`` bounds a count,
   ``hint`` may be a callable ``(expected, got, state) -> str`` that names the likely mistake.
   Invariants (``@EX.invariant("name")``, ``fn(state) -> message or None``) run on every state.
   Raise ``AssertionError`` for anything else the driver checks itself.
4. Add the exercise's differential test (:mod:`pagedlab.grading.differential`): a hypothesis strategy
   drawing one case as plain data, and a driver running ONE case and recording the whole state::

       @differential(EX, cases(), examples=60, draws="block tables out of order, block sizes 1-32")
       def _(schedule_step, case, rec):
           world = make_world(case)                   # built fresh from the case
           ...                                        # rec.step / rec.observe / rec.state as above

5. Add at least three plausible wrong implementations (learners' mistakes), one file each, to
   its folder ``tests/grading/wrong_versions/<id>/`` (see ``tests/grading/helpers.py``); the suite
   checks the solution passes, the stub and every wrong version fail.
6. In the notebook: the exercise cell, then a cell ``check(<name>)``.
"""

from pathlib import Path

from pagedlab.grading.registry import register_solutions

register_solutions(Path(__file__).resolve().parent / "solutions")

# Importing a lab's module registers its exercises (``register(Exercise(...))`` at its top level).
from pagedlab.course.exercises import (  # noqa: E402  after the solutions folder: a module may read its cells
    lab01,
    lab02,
    lab02_slot_mapping,
    lab03,
    lab04,
    lab05,
    lab06,
    lab06_preempt,
    lab07,
    lab07_differential,
    lab07_lookup,
    lab08,
    lab08_triton,
)

#: The exercise modules, in the order they register.
MODULES = [
    lab01,
    lab02,
    lab02_slot_mapping,
    lab03,
    lab04,
    lab05,
    lab06,
    lab07,
    lab07_differential,
    lab08,
    lab06_preempt,
    lab07_lookup,
    lab08_triton,
]
