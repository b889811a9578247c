"""Orders: a small shop's order book — look up an order, a customer's orders, cancel one.

Cancelling a shipped or delivered order is refused with 409, an unknown order id
with 404; a cancellation is remembered in the trial's state, so cancelling twice
is refused too, as a real order service would.
"""

from __future__ import annotations

from typing import Any

from runner.core.types import ToolSpec
from runner.probes.propagation.toolsim.base import Domain, ToolFailure

# order_id: (customer_id, status, placed, shipped, [(sku, name, qty, unit price)])
_ORDERS: dict[str, tuple[str, str, str, str | None, tuple[tuple[str, str, int, float], ...]]] = {
    "ORD-10231": ("CUS-501", "delivered", "2024-03-02", "2024-03-04", (("SKU-118", "Desk lamp", 1, 39.90), ("SKU-412", "LED bulb 4-pack", 2, 11.50))),
    "ORD-10232": ("CUS-502", "shipped", "2024-03-09", "2024-03-11", (("SKU-220", "Office chair", 1, 189.00),)),
    "ORD-10233": ("CUS-501", "processing", "2024-03-12", None, (("SKU-305", "Monitor arm", 1, 74.25), ("SKU-306", "Cable tray", 1, 18.75))),
    "ORD-10234": ("CUS-503", "processing", "2024-03-13", None, (("SKU-118", "Desk lamp", 2, 39.90), ("SKU-509", "Notebook A5", 5, 4.20))),
    "ORD-10235": ("CUS-504", "delivered", "2024-03-13", "2024-03-15", (("SKU-610", "Standing desk", 1, 429.00),)),
    "ORD-10236": ("CUS-502", "cancelled", "2024-03-14", None, (("SKU-412", "LED bulb 4-pack", 3, 11.50),)),
    "ORD-10237": ("CUS-505", "shipped", "2024-03-16", "2024-03-18", (("SKU-701", "Wireless keyboard", 1, 59.99), ("SKU-702", "Wireless mouse", 1, 29.99))),
    "ORD-10238": ("CUS-503", "processing", "2024-03-18", None, (("SKU-220", "Office chair", 2, 189.00),)),
    "ORD-10239": ("CUS-506", "delivered", "2024-03-19", "2024-03-21", (("SKU-509", "Notebook A5", 10, 4.20), ("SKU-810", "Gel pens 12-pack", 2, 8.40))),
    "ORD-10240": ("CUS-504", "processing", "2024-03-21", None, (("SKU-305", "Monitor arm", 2, 74.25),)),
    "ORD-10241": ("CUS-505", "shipped", "2024-03-22", "2024-03-25", (("SKU-118", "Desk lamp", 1, 39.90),)),
    "ORD-10242": ("CUS-506", "processing", "2024-03-25", None, (("SKU-610", "Standing desk", 1, 429.00), ("SKU-306", "Cable tray", 2, 18.75))),
    "ORD-10243": ("CUS-501", "processing", "2024-03-27", None, (("SKU-701", "Wireless keyboard", 2, 59.99),)),
}
_ORDER_ID = {"type": "string", "pattern": r"ORD-\d{5}", "format_hint": "ORD- followed by 5 digits"}
_CUSTOMER_ID = {"type": "string", "pattern": r"CUS-\d{3}", "format_hint": "CUS- followed by 3 digits"}
_STATUSES = ["processing", "shipped", "delivered", "cancelled"]
_ORDER = {
    "type": "object", "required": ["order_id", "customer_id", "status", "placed_date", "items", "total", "currency"],
    "properties": {"order_id": _ORDER_ID, "customer_id": _CUSTOMER_ID, "status": {"type": "string", "enum": _STATUSES},
                   "placed_date": {"type": "string"}, "items": {"type": "array"},
                   "total": {"type": "number", "minimum": 0, "maximum": 100000},
                   "currency": {"type": "string", "enum": ["USD"]}},
}


def order(order_id: str, state: dict[str, Any] | None = None) -> dict[str, Any]:
    """The order as the service returns it (status reflects the trial's cancellations)."""
    row = _ORDERS.get(order_id)
    if row is None:
        raise ToolFailure(404, f"order {order_id} not found")
    customer, status, placed, shipped, items = row
    if state and order_id in state.get("cancelled", ()):
        status = "cancelled"
    total = round(sum(q * p for _, _, q, p in items), 2)
    out: dict[str, Any] = {"order_id": order_id, "customer_id": customer, "status": status, "placed_date": placed,
                           "items": [{"sku": s, "name": n, "quantity": q, "unit_price": p} for s, n, q, p in items],
                           "total": total, "currency": "USD"}
    if shipped:
        out["shipped_date"] = shipped
    return out


def _get(args: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    return order(args["order_id"], state)


def _list(args: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    mine = [order(oid, state) for oid, row in _ORDERS.items() if row[0] == args["customer_id"]]
    if not mine:
        raise ToolFailure(404, f"customer {args['customer_id']} not found")
    return {"customer_id": args["customer_id"], "count": len(mine),
            "orders": [{k: o[k] for k in ("order_id", "status", "placed_date", "total")} for o in mine]}


def _cancel(args: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    current = order(args["order_id"], state)
    if current["status"] in ("shipped", "delivered"):
        raise ToolFailure(409, f"order {args['order_id']} has already been {current['status']} and cannot be cancelled; "
                               "start a return instead")
    if current["status"] == "cancelled":
        raise ToolFailure(409, f"order {args['order_id']} is already cancelled")
    state.setdefault("cancelled", set()).add(args["order_id"])
    return {"order_id": args["order_id"], "status": "cancelled", "refund_amount": current["total"], "currency": "USD"}


def build() -> Domain:
    domain = Domain("orders", "a shop's order book: order details, a customer's orders, cancellations")
    domain.add(ToolSpec("get_order", "Look up an order by id: status, items, total and ship date.",
                        {"type": "object", "additionalProperties": False, "required": ["order_id"],
                         "properties": {"order_id": {**_ORDER_ID, "description": "e.g. ORD-10234"}}}),
               _ORDER, _get)
    domain.add(ToolSpec("list_orders", "List a customer's orders with their status and total.",
                        {"type": "object", "additionalProperties": False, "required": ["customer_id"],
                         "properties": {"customer_id": {**_CUSTOMER_ID, "description": "e.g. CUS-501"}}}),
               {"type": "object", "required": ["customer_id", "count", "orders"],
                "properties": {"customer_id": _CUSTOMER_ID, "count": {"type": "integer", "minimum": 0, "maximum": 1000},
                               "orders": {"type": "array", "items": {"type": "object"}}}},
               _list)
    domain.add(ToolSpec("cancel_order", "Cancel an order that has not been sent yet; returns the refund amount.",
                        {"type": "object", "additionalProperties": False, "required": ["order_id", "reason"],
                         "properties": {"order_id": {**_ORDER_ID, "description": "e.g. ORD-10234"},
                                        "reason": {"type": "string", "enum": ["customer_request", "duplicate", "fraud", "other"]}}}),
               {"type": "object", "required": ["order_id", "status", "refund_amount"],
                "properties": {"order_id": _ORDER_ID, "status": {"type": "string", "enum": ["cancelled"]},
                               "refund_amount": {"type": "number", "minimum": 0, "maximum": 100000},
                               "currency": {"type": "string"}}},
               _cancel, side_effect=True)
    return domain
