"""Outcome columns as plain data: a name and a type, made into Arrow fields only where a table is built.

A probe declares the columns it writes when its class is defined, so every command that reads a sweep defines
them. Declared as Arrow fields they would make ``validate``, ``plan`` and ``--help`` import pyarrow and numpy
(0.2 CPU-s of a 0.6 s start-up) for names and types they only compare. ``Column.field()`` builds the Arrow
field when a writer, an importer or the resume check asks for one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import pyarrow as pa

Scalar = Literal["bool", "int8", "int16", "int32", "int64", "float64", "string"]


@dataclass(frozen=True)
class ListOf:
    """A list column's item type: a scalar, or a struct."""

    item: Scalar | Struct


@dataclass(frozen=True)
class Struct:
    """A struct's fields, in order."""

    fields: tuple[Column, ...]


ColumnType = Scalar | ListOf | Struct


@dataclass(frozen=True)
class Column:
    """One outcome column: ``Column("decoy_called", "bool")``, ``Column("tools_called", ListOf("string"))``."""

    name: str
    type: ColumnType

    def field(self) -> pa.Field:
        import pyarrow as pa

        return pa.field(self.name, arrow_type(self.type))


def arrow_type(t: ColumnType) -> pa.DataType:
    import pyarrow as pa

    if isinstance(t, ListOf):
        return pa.list_(arrow_type(t.item))
    if isinstance(t, Struct):
        return pa.struct([c.field() for c in t.fields])
    scalars = {"bool": pa.bool_, "int8": pa.int8, "int16": pa.int16, "int32": pa.int32, "int64": pa.int64,
               "float64": pa.float64, "string": pa.string}
    return scalars[t]()
