"""The bottom layer: neutral types, errors, seeding, the row schema, reading user files, JSON walking, number
formatting, probe views as data (``views``) and the reports' inference settings (``constants``). It imports nothing
else of ``runner``, so every other layer can depend on it.
"""
