"""Calendar: one team calendar for 2024 with a fixed working week of meetings.

``list_events`` reads a day, ``create_event`` books a slot (409 on a clash with an
existing meeting, the way calendar APIs refuse double-booking), ``delete_event``
removes a meeting by id (404 for an unknown id). Created and deleted events live
in the trial's state, so a trial that creates then lists sees its own event.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from runner.core.seeding import stable_int
from runner.core.types import ToolSpec
from runner.probes.propagation.toolsim.base import Domain, ToolFailure

# (event_id, date, start, minutes, title)
_EVENTS: tuple[tuple[str, str, str, int, str], ...] = (
    ("EVT_1001", "2024-06-03", "09:30", 15, "Team standup"),
    ("EVT_1002", "2024-06-03", "11:00", 60, "Roadmap review"),
    ("EVT_1003", "2024-06-03", "15:00", 30, "1:1 with Priya"),
    ("EVT_1004", "2024-06-04", "09:30", 15, "Team standup"),
    ("EVT_1005", "2024-06-04", "13:00", 90, "Vendor demo: Quorbis"),
    ("EVT_1006", "2024-06-05", "09:30", 15, "Team standup"),
    ("EVT_1007", "2024-06-05", "10:00", 45, "Hiring panel"),
    ("EVT_1008", "2024-06-05", "14:00", 60, "Budget sync"),
    ("EVT_1009", "2024-06-05", "16:30", 30, "Design critique"),
    ("EVT_1010", "2024-06-06", "09:30", 15, "Team standup"),
    ("EVT_1011", "2024-06-06", "12:00", 60, "Lunch and learn"),
    ("EVT_1012", "2024-06-07", "09:30", 15, "Team standup"),
    ("EVT_1013", "2024-06-07", "15:00", 60, "Sprint retro"),
    ("EVT_1014", "2024-06-10", "10:00", 120, "Quarterly planning"),
)
_YEAR = 2024
DATE = {"type": "string", "pattern": r"\d{4}-\d{2}-\d{2}", "format_hint": "YYYY-MM-DD"}
_TIME = {"type": "string", "pattern": r"\d{2}:\d{2}", "format_hint": "HH:MM (24-hour)"}
_EVENT_ID = {"type": "string", "pattern": r"EVT_\d{4}", "format_hint": "EVT_ followed by 4 digits"}


def _minutes(hhmm: str) -> int:
    hours, minutes = int(hhmm[:2]), int(hhmm[3:])
    if hours > 23 or minutes > 59:
        raise ToolFailure(422, f"'start_time' is not a time of day: {hhmm!r}")
    return hours * 60 + minutes


def _hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _day(text: str) -> str:
    try:
        day = dt.date.fromisoformat(text)
    except ValueError:
        raise ToolFailure(400, f"'date' is not a calendar date: {text!r}") from None
    if day.year != _YEAR:
        raise ToolFailure(422, f"date {text} is outside this calendar, which holds {_YEAR} only")
    return text


def _events(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    if "events" not in state:
        state["events"] = {e[0]: {"event_id": e[0], "date": e[1], "start_time": e[2], "duration_minutes": e[3],
                                  "title": e[4]} for e in _EVENTS}
    return state["events"]


def _list(args: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    day = _day(args["date"])
    found = sorted((e for e in _events(state).values() if e["date"] == day), key=lambda e: e["start_time"])
    return {"date": day, "count": len(found),
            "events": [{k: e[k] for k in ("event_id", "title", "start_time", "duration_minutes")} for e in found]}


def _create(args: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    day = _day(args["date"])
    start = _minutes(args["start_time"])
    end = start + args["duration_minutes"]
    if end > 24 * 60:
        raise ToolFailure(422, "the event would run past midnight; shorten it or start earlier")
    events = _events(state)
    for e in events.values():
        e_start = _minutes(e["start_time"])
        if e["date"] == day and start < e_start + e["duration_minutes"] and e_start < end:
            raise ToolFailure(409, f"time slot conflicts with {e['event_id']} ({e['title']}, {e['start_time']})")
    event_id = f"EVT_{2000 + stable_int('calendar', args['title'], day, args['start_time']) % 8000:04d}"
    events[event_id] = {"event_id": event_id, "date": day, "start_time": args["start_time"],
                        "duration_minutes": args["duration_minutes"], "title": args["title"]}
    return {"event_id": event_id, "status": "created", "title": args["title"], "date": day,
            "start_time": args["start_time"], "end_time": _hhmm(end)}


def _delete(args: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    events = _events(state)
    event = events.pop(args["event_id"], None)
    if event is None:
        raise ToolFailure(404, f"event {args['event_id']} not found")
    return {"event_id": event["event_id"], "status": "deleted", "title": event["title"], "date": event["date"]}


def build() -> Domain:
    domain = Domain("calendar", "a team calendar for 2024: list a day, book a meeting, cancel one")
    domain.add(ToolSpec("list_events", "List the meetings (calendar events) on a date: how many there are, with their ids, titles and start times.",
                        {"type": "object", "additionalProperties": False, "required": ["date"],
                         "properties": {"date": {**DATE, "description": "YYYY-MM-DD"}}}),
               {"type": "object", "required": ["date", "count", "events"],
                "properties": {"date": DATE, "count": {"type": "integer", "minimum": 0, "maximum": 48},
                               "events": {"type": "array", "items": {"type": "object", "required": ["event_id", "title", "start_time"],
                                                                      "properties": {"event_id": _EVENT_ID, "title": {"type": "string"},
                                                                                     "start_time": _TIME}}}}},
               _list)
    domain.add(ToolSpec("create_event", "Book (schedule) a new meeting as a calendar event; returns the new event id.",
                        {"type": "object", "additionalProperties": False,
                         "required": ["title", "date", "start_time", "duration_minutes"],
                         "properties": {"title": {"type": "string", "description": "event title"},
                                        "date": {**DATE, "description": "YYYY-MM-DD"},
                                        "start_time": {**_TIME, "description": "HH:MM, 24-hour"},
                                        "duration_minutes": {"type": "integer", "minimum": 15, "maximum": 480,
                                                             "description": "length in minutes, 15-480"}}}),
               {"type": "object", "required": ["event_id", "status", "date", "start_time", "end_time"],
                "properties": {"event_id": _EVENT_ID, "status": {"type": "string", "enum": ["created"]},
                               "date": DATE, "start_time": _TIME, "end_time": _TIME, "title": {"type": "string"}}},
               _create, side_effect=True)
    domain.add(ToolSpec("delete_event", "Cancel a meeting: delete a calendar event by its id.",
                        {"type": "object", "additionalProperties": False, "required": ["event_id"],
                         "properties": {"event_id": {**_EVENT_ID, "description": "e.g. EVT_1002"}}}),
               {"type": "object", "required": ["event_id", "status"],
                "properties": {"event_id": _EVENT_ID, "status": {"type": "string", "enum": ["deleted"]},
                               "title": {"type": "string"}, "date": DATE}},
               _delete, side_effect=True)
    return domain
