"""From rows to numbers: per-cell counts, the summary tables, probe views, the planner and diff. Nothing here draws.
"""
