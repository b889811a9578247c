"""What a user writes: the sweep file (``sweep``) and its prices and budget (``cost``), validated with pydantic.
"""
