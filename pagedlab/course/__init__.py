"""The course: what the labs ask the learner to write, and the labs themselves.

Course content, not grading machinery (that is :mod:`pagedlab.grading`, which knows no exercise):

* ``exercises/`` - one module per lab registering its exercises, tests, hints and pictures into the
  grader's registry (:mod:`pagedlab.grading.registry`), and ``exercises/solutions/``, each exercise's
  canonical solution cell. Importing ``pagedlab.course.exercises`` registers them all; it is the one
  name the grader holds for the course (``registry.DEFAULT_COURSE``).
* ``labs_build`` / ``labs_cli`` - ``pagedlab labs build``: ``labs/`` generated from ``solutions/``.
* ``formats`` - the same exercises as nbgrader and otter-grader source notebooks.
* ``capstone`` - lab 09's capstone: the learner's parts served on the engine.

Importing this package imports nothing (``pagedlab labs`` stays cheap).
"""
