"""Weather: an archive of daily observations and a short forecast, for twelve cities.

Values are a deterministic function of (city, date): a monthly climate normal per
city plus a hashed day-to-day deviation, rounded as a weather service would. The
archive covers 2020-01-01 to 2025-12-31; outside it the service answers 422, and an
unknown city 404, as real weather APIs do.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from runner.core.seeding import stable_int
from runner.core.types import ToolSpec
from runner.probes.propagation.toolsim.base import Domain, ToolFailure

# monthly mean temperature (°C), January..December
_CLIMATE: dict[str, tuple[float, ...]] = {
    "Lisbon": (11.6, 12.6, 14.6, 15.6, 18.1, 21.1, 23.0, 23.4, 21.9, 18.6, 14.8, 12.4),
    "Oslo": (-4.3, -4.0, -0.2, 4.5, 10.8, 15.2, 16.4, 15.2, 10.8, 6.3, 0.7, -3.1),
    "Toronto": (-5.5, -4.5, -0.1, 6.7, 12.9, 18.4, 21.5, 20.6, 16.2, 9.5, 3.7, -2.2),
    "Dubai": (19.1, 20.3, 23.0, 27.3, 31.3, 33.4, 35.4, 35.6, 32.7, 29.3, 24.7, 20.7),
    "Istanbul": (6.0, 6.1, 8.0, 12.0, 16.8, 21.5, 24.1, 24.3, 20.7, 16.3, 11.7, 8.2),
    "Nairobi": (19.0, 19.8, 20.2, 19.6, 18.7, 17.3, 16.5, 17.0, 18.4, 19.5, 19.1, 18.8),
    "Tokyo": (5.4, 6.1, 9.4, 14.3, 18.8, 21.9, 25.7, 26.9, 23.3, 18.0, 12.5, 7.7),
    "Sydney": (23.5, 23.4, 22.1, 19.5, 16.6, 14.2, 13.4, 14.5, 17.0, 19.0, 20.9, 22.4),
    "Chicago": (-4.6, -2.6, 3.2, 9.6, 15.8, 21.4, 24.1, 23.3, 19.1, 12.2, 5.0, -1.6),
    "Madrid": (6.3, 7.9, 11.2, 12.9, 16.9, 22.2, 25.6, 25.1, 20.9, 15.1, 9.9, 6.9),
    "Mumbai": (24.4, 25.1, 27.1, 28.7, 30.2, 29.5, 27.9, 27.6, 27.9, 28.8, 27.8, 25.6),
    "Reykjavik": (-0.5, 0.4, 0.5, 2.9, 6.3, 9.0, 10.6, 10.3, 7.4, 4.4, 1.1, -0.2),
}
CONDITIONS = ("clear", "partly cloudy", "overcast", "light rain", "rain", "windy", "fog")
_FIRST_DAY = dt.date(2020, 1, 1)
_LAST_DAY = dt.date(2025, 12, 31)

DATE = {"type": "string", "pattern": r"\d{4}-\d{2}-\d{2}", "format_hint": "YYYY-MM-DD"}
_UNITS = {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "default celsius"}
_OBSERVATION = {
    "type": "object",
    "required": ["city", "date", "temperature", "units", "condition", "humidity"],
    "properties": {
        "city": {"type": "string"}, "date": DATE,
        "temperature": {"type": "number", "minimum": -90, "maximum": 140},
        "units": _UNITS, "condition": {"type": "string", "enum": list(CONDITIONS)},
        "humidity": {"type": "integer", "minimum": 0, "maximum": 100},
    },
}


def _city(name: str) -> str:
    for known in _CLIMATE:
        if known.lower() == name.strip().lower():
            return known
    raise ToolFailure(404, f"city {name!r} not found; this service covers {', '.join(_CLIMATE)}")


def _date(text: str) -> dt.date:
    try:
        day = dt.date.fromisoformat(text)
    except ValueError:
        raise ToolFailure(400, f"'date' is not a calendar date: {text!r}") from None
    if not _FIRST_DAY <= day <= _LAST_DAY:
        raise ToolFailure(422, f"no observations for {text}: the archive covers {_FIRST_DAY} to {_LAST_DAY}")
    return day


def _observe(city: str, day: dt.date, units: str = "celsius") -> dict[str, Any]:
    """The archived observation for ``city`` on ``day`` (a pure function)."""
    h = stable_int("weather", city, day.isoformat())
    deviation = ((h % 1000) / 1000.0 - 0.5) * 8.0  # ±4 °C around the monthly normal
    celsius = round(_CLIMATE[city][day.month - 1] + deviation, 1)
    temperature = celsius if units == "celsius" else round(celsius * 9 / 5 + 32, 1)
    return {"city": city, "date": day.isoformat(), "temperature": temperature, "units": units,
            "condition": CONDITIONS[(h >> 12) % len(CONDITIONS)], "humidity": 30 + (h >> 20) % 61}


def _get_weather(args: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    return _observe(_city(args["city"]), _date(args["date"]), args.get("units", "celsius"))


def _get_forecast(args: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    city, start = _city(args["city"]), _date(args["date"])
    units = args.get("units", "celsius")
    days = [_observe(city, start + dt.timedelta(days=i + 1), units) for i in range(args["days"])
            if start + dt.timedelta(days=i + 1) <= _LAST_DAY]
    temps = [d["temperature"] for d in days]
    return {"city": city, "from": start.isoformat(), "units": units,
            "days": [{"date": d["date"], "temperature": d["temperature"], "condition": d["condition"]} for d in days],
            "max_temperature": max(temps), "min_temperature": min(temps)}


def build() -> Domain:
    domain = Domain("weather", "a weather archive: daily observations and a short outlook for twelve cities")
    domain.add(ToolSpec(
        "get_weather", "Get the observed weather (temperature, condition, humidity) for a city on a date.",
        {"type": "object", "additionalProperties": False, "required": ["city", "date"],
         "properties": {"city": {"type": "string", "description": "city name, e.g. Lisbon"},
                        "date": {**DATE, "description": "date as YYYY-MM-DD"}, "units": _UNITS}}),
        _OBSERVATION, _get_weather)
    domain.add(ToolSpec(
        "get_forecast", "Get the daily temperatures for the days after a date, with their maximum and minimum.",
        {"type": "object", "additionalProperties": False, "required": ["city", "date", "days"],
         "properties": {"city": {"type": "string", "description": "city name"},
                        "date": {**DATE, "description": "the day before the first forecast day, YYYY-MM-DD"},
                        "days": {"type": "integer", "minimum": 1, "maximum": 7, "description": "how many days, 1-7"},
                        "units": _UNITS}}),
        {"type": "object", "required": ["city", "from", "days", "max_temperature", "min_temperature"],
         "properties": {"city": {"type": "string"}, "from": DATE, "units": _UNITS,
                        "days": {"type": "array", "items": {"type": "object"}},
                        "max_temperature": {"type": "number", "minimum": -90, "maximum": 140},
                        "min_temperature": {"type": "number", "minimum": -90, "maximum": 140}}},
        _get_forecast)
    return domain
