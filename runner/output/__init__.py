"""An output directory on disk: the writer (Arrow IPC parts), which rows count, the one-writer lock, and the
manifest's start and finish records.

It sits between ``runner.config`` (a sweep) and ``runner.execution`` (running one), so the run, the readers
above it (analysis, reporting) and the importers share one definition of what an output holds.
"""
