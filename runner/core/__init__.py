"""The bottom layer: neutral types, errors, seeding, the row schema, reading user files, JSON walking and number
formatting. It imports nothing else of ``runner``, so every other layer can depend on it.
"""
