"""Turning a sweep into rows: grid, engine, trial runner, deadlines, progress, budget, replay, rescore, a trial's
recorded calls read back (exchange), and the run modes (local, batch). What is written where lives one layer
down, in ``runner.output``.
"""
