"""Turning a sweep into rows: grid, engine, trial runner, deadlines, sink, manifest, progress, budget, replay,
rescore, and the run modes (local, batch).
"""
