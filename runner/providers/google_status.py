"""Google's canonical error codes (``google.rpc.Code``): number → (the HTTP status it maps to, its name).

One table for both sides of the Gemini API's batch mode: a per-request error in a batch is a ``google.rpc.Status``
with the number only, which the client turns into the HTTP status a live call would have got (so the two are
classified alike), and which ``trialgrid serve`` writes.
"""

from __future__ import annotations

GRPC_STATUS = {1: (499, "CANCELLED"), 2: (500, "UNKNOWN"), 3: (400, "INVALID_ARGUMENT"), 4: (504, "DEADLINE_EXCEEDED"),
               5: (404, "NOT_FOUND"), 6: (409, "ALREADY_EXISTS"), 7: (403, "PERMISSION_DENIED"),
               8: (429, "RESOURCE_EXHAUSTED"), 9: (400, "FAILED_PRECONDITION"), 10: (409, "ABORTED"),
               11: (400, "OUT_OF_RANGE"), 12: (501, "UNIMPLEMENTED"), 13: (500, "INTERNAL"), 14: (503, "UNAVAILABLE"),
               15: (500, "DATA_LOSS"), 16: (401, "UNAUTHENTICATED")}
