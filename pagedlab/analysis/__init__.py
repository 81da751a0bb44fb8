"""Helpers the lab notebooks use for their widgets and measurements (one module per lab).

They keep the notebooks short: replaying a trace step by step and drawing it (``lab01``),
timing the free queue (``lab02``), counting shared blocks on the real engine (``lab03``).
Nothing here is an exercise: the learner writes those, and these helpers never call the
learner's code, so a lab still runs to the end while an exercise is unfinished.
"""
