"""Ray cluster mode: actors that run runner's engine on shards of the grid.

Empty until the cluster issue lands; it will import ``runner`` and ``stats``, never
the reverse.
"""
