"""Fuzz: hundreds of generated bad inputs, each a clean exit 2 with located one-line errors.

Seeded and bounded. Most inputs run in-process through the CLI (typer's CliRunner on
``runner.cli.app.app``, the same group ``trialgrid`` runs) for speed; a few run as
real subprocesses under RLIMIT_AS to prove the bounds hold where memory is real.
Targets: sweeps, case files (triples YAML, negative JSON lines), catalogues (JSON),
MCP replies (a fake stdio server), and every importer's input (bfcl, ungrounded
stimuli and tools, trials CSV, agentprop CSVs). The counts by kind are printed
(``pytest -s``) for the record.
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from runner.cli.app import app
from tests.conftest import CONFIGS, ROOT, quickstart_dict

SEED = 13
#: a refusal costs at most this many times the CPU of validating the bundled quickstart, measured in the same
#: test (bounds are CPU, not wall-clock: a loaded machine stretches the wall clock, not the work). The worst
#: input measured costs ~3x in-process; in a real process start-up dominates both sides.
MAX_CPU_RATIO = 20.0
MAX_RSS_MB = 500

cli = CliRunner()


@dataclass
class Case:
    kind: str  # what is fuzzed: sweep, triples, catalogue, jsonl-cases, mcp, bfcl, ungrounded-*, trials, agentprop
    label: str
    args: list[str]


# -- hostile whole files -----------------------------------------------------------------------------------------

def alias_bomb(levels: int, width: int) -> str:
    lines = ["a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def whole_files(rng: random.Random) -> Iterator[tuple[str, bytes | str]]:
    """(label, content) of files that are no valid trialgrid input of any kind."""
    yield "empty", b""
    yield "whitespace", b"   \n\t\n"
    yield "nul bytes", b"\x00" * 64
    yield "binary png", b"\x89PNG\r\n\x1a\n" + bytes(rng.randrange(256) for _ in range(256)) + b"\xff"
    yield "random bytes", bytes(rng.randrange(256) for _ in range(512)) + b"\xfe\xff"
    yield "utf-16 bom", "name: x\n".encode("utf-16")
    yield "lone surrogate bytes", b"name: \xed\xa0\x80\n"
    for levels, width in ((9, 9), (12, 4), (6, 30)):
        yield f"alias bomb {levels}x{width}", alias_bomb(levels, width)
    yield "recursive alias", "a: &a [*a]\n"
    yield "deep flow nesting", "[" * 5000 + "]" * 5000
    yield "deep block nesting", "".join(" " * i + "k:\n" for i in range(300)) + " " * 300 + "v\n"
    yield "deep json", '{"a":' * 3000 + "1" + "}" * 3000
    yield "huge integer", "9" * 20000 + "\n"
    yield "huge float", "1e99999\n"
    yield "top-level string", '"just a string"\n'
    yield "top-level number", "42\n"
    yield "top-level list of nulls", "[null, null, null]\n"
    yield "unclosed flow", "{name: [x, y\n"
    yield "tab indentation", "name: x\n\tmodels: []\n"
    yield "unicode soup", "".join(chr(rng.choice([0x202E, 0x200B, 0xFEFF, 0x1F600, 0x0301, 0x4E2D, 0x0]))
                                  for _ in range(200))
    yield "very long line", "k: " + "x" * 300_000 + "\n"
    yield "yaml 1.1 traps", "seed: 010\nruns: yes\non: off\n"
    yield "duplicate keys", "name: a\nname: b\n"
    yield "control characters", "name: \x1b]0;TITLE\x07\x1b[2J\n"


def truncations(valid: bytes, rng: random.Random, n: int, *, upto: float = 0.5) -> Iterator[tuple[str, bytes]]:
    for _ in range(n):
        k = rng.randrange(1, max(2, int(len(valid) * upto)))
        yield f"truncated at {k}", valid[:k]


DEVICES = ["/dev/zero", "/dev/null", "/dev/urandom"]


# -- value mutations -----------------------------------------------------------------------------------------------

HOSTILE_VALUES: list[Any] = [None, -1, 0, 2**70, -(2**70), 1e308 * 10, "", "x" * 5000, [], {}, [[[[[]]]]], "ünï©ødé",
                             "\x1b[2J", "=1+1", "../../etc/passwd", {"nested": {"deep": [1, 2, {"x": None}]}}, True,
                             "NaN", 3.5, "0x1F"]


def set_path(data: Any, path: tuple, value: Any) -> Any:
    target = data
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return data


SWEEP_PATHS: list[tuple[tuple, list[Any]]] = [
    (("seed",), [-1, 2**64, "abc", [], {}, 1.5, None, "1e400"]),
    (("name",), ["", "../x", "a b", "ünï", "\u202ex", 5, [], None]),
    (("models",), [[], "x", 5, [{}], [None], [{"name": "m"}], [{"name": "m", "provider": "nosuch"}], None]),
    (("models", 0, "name"), ["", "x\x1b[2J", "a" * 500, 5, [], None]),
    (("models", 0, "provider"), ["", "nosuch", 5, [], None]),
    (("models", 0, "concurrency"), [0, -3, 10**9, "fast", [], 1.5]),
    (("models", 0, "params"), ["x", 5, []]),
    (("probes",), [[], "x", 5, [{}], [{"kind": "nosuch"}], [None], None]),
    (("probes", 0, "runs"), [0, -5, 10**7, "many", [], 1.5, None]),
    (("probes", 0, "cases"), ["/dev/zero", "/dev/null", "nosuch.yaml", "", [], 5, "."]),
    (("probes", 0, "catalogue"), ["/dev/urandom", "nosuch.json", [], 5, ".."]),
    (("probes", 0, "conditions"), [[], ["nosuch"], "x", 5]),
    (("engine",), ["x", 5, {"concurrency": 0}, {"nosuch": 1}, {"timeout_s": -1}]),
    (("prices",), ["x", {"nosuch-model": {"input": 1, "output": 1}}]),
    (("ключ",), [1]),
    (("modles",), [[]]),
]


def sweep_mutations() -> Iterator[tuple[str, dict[str, Any]]]:
    for path, values in SWEEP_PATHS:
        for value in values:
            data = quickstart_dict()
            set_path(data, path, value)
            yield f"{'.'.join(map(str, path))} = {str(value)[:30]!r}", data


TRIPLE_KEYS = ["id", "expected_tool", "ungroundable", "groundable_known"]


def triple_mutations(rng: random.Random) -> Iterator[tuple[str, Any]]:
    base = yaml.safe_load((CONFIGS / "misselection" / "triples.yaml").read_text())
    for key in TRIPLE_KEYS:
        for value in (None, 5, [], {}, "") if key != "expected_tool" else (None, 5, [], {}):
            data = json.loads(json.dumps(base))
            set_path(data, ("triples", rng.randrange(len(data["triples"])), key), value)
            yield f"triples[].{key} = {value!r}", data
    for shape in ([], {"triples": []}, {"triples": "x"}, {"cases": []}, [1, 2, 3], {"triples": [None]}):
        yield f"shape {str(shape)[:20]}", shape
    dup = json.loads(json.dumps(base))
    dup["triples"].append(dict(dup["triples"][0]))
    yield "duplicate triple id", dup


def catalogue_mutations() -> Iterator[tuple[str, Any]]:
    base = json.loads((CONFIGS / "misselection" / "tools.json").read_text())
    for path, values in (((0,), [5, "x", {}, None, []]),
                         ((0, "function"), [5, "x", {}, None]),
                         ((0, "function", "name"), ["", 5, None, []]),
                         ((0, "function", "parameters"), ["x", 5, []])):
        for value in values:
            data = json.loads(json.dumps(base))
            set_path(data, path, value)
            yield f"tools{list(path)} = {value!r}", data
    for shape in ([], {}, "tools", 5, {"tools": "x"}, [None]):
        yield f"shape {shape!r}", shape


#: a secret each generated setting carries where a credential would be: it must never be printed back
SECRET = "hunter2-9f8e7d6c5b4a"
_CONTROLS = ["\x00", "\n", "\r", "\r\n", "\x1b", "\x7f", "\x9b", "\t\n"]  # not NEL: YAML folds it to a space
_CREDENTIAL_NAMES = ["Authorization", "X-Auth", "X-Auth-Token", "Ocp-Apim-Subscription-Key", "X-Api-Key", "api_key",
                     "Proxy-Authorization", "X-Access-Key", "Cookie", "X-Amz-Security-Token", "X-Client-Secret",
                     "X-Goog-Api-Key", "Private-Key", "X-Password", "X-Credential", "X-Signature"]
_BAD_HEADER_NAMES = ["", " ", "X Trace", "X:Trace", "X\nTrace", "Content-Length", "Host", "Transfer-Encoding",
                     "Connection", "é-header", "X(Trace)"]
_SCHEMES = ["Bearer", "Basic", "bearer", "BASIC", "Digest", "Token", "Negotiate"]


def _insert(rng: random.Random, text: str, piece: str) -> str:
    at = rng.randrange(len(text) + 1)
    return text[:at] + piece + text[at:]


def _case_flip(rng: random.Random, text: str) -> str:
    return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in text)


def _nested_non_finite(rng: random.Random, depth: int) -> Any:
    bad = rng.choice([float("nan"), float("inf"), float("-inf")])
    for _ in range(depth):
        bad = rng.choice([[1, bad], {"k": bad}, [{"x": [bad]}]])
    return bad


def settings_mutations(rng: random.Random, n: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """``n`` model settings that cannot work, generated (seeded): each must be refused at load, in one line, without
    printing the secret it carries. ``model`` is an openai model entry on a dead loopback port (nothing is sent)."""
    url = "http://127.0.0.1:9/v1"
    kinds = ["url control", "url userinfo", "url query secret", "header value control", "header name bad",
             "header name credential", "header value scheme", "params non-finite", "float non-finite", "tpm too small",
             "path system", "path control"]
    for i in range(n):
        kind = kinds[i % len(kinds)]
        model: dict[str, Any] = {"name": "m", "provider": "openai", "model": "gpt-x", "base_url": url,
                                 "api_key_env": "TG_FUZZ_KEY"}
        top: dict[str, Any] = {}
        if kind == "url control":
            model["base_url"] = _insert(rng, url, rng.choice(_CONTROLS + [" "]))
            if not model["base_url"].startswith("http://"):
                model["base_url"] = url + rng.choice(_CONTROLS)
        elif kind == "url userinfo":
            user = rng.choice(["", "admin", "u%40x", "sk"])
            model["base_url"] = f"http://{user}:{SECRET}@127.0.0.1:9/v1" if rng.random() < 0.7 else \
                f"https://{SECRET}@127.0.0.1:9/v1"
        elif kind == "url query secret":
            name = rng.choice(["api_key", "apikey", "key", "token", "access_token", "sig", "X-Api-Key", "secret",
                               "password", "code"])
            model["base_url"] = f"{url}?{'api-version=1&' if rng.random() < 0.5 else ''}{_case_flip(rng, name)}={SECRET}"
        elif kind == "header value control":
            model["headers"] = {"X-Trace": _insert(rng, "value-1", rng.choice(_CONTROLS))}
        elif kind == "header name bad":
            model["headers"] = {rng.choice(_BAD_HEADER_NAMES): "v"}
        elif kind == "header name credential":
            name = _case_flip(rng, rng.choice(_CREDENTIAL_NAMES))
            model["headers"] = {name: SECRET}
        elif kind == "header value scheme":
            gap = rng.choice([" ", "  ", "\t"])
            model["headers"] = {rng.choice(["X-Custom", "X-Upstream", "Forwarded-For-Key-Id"]):
                                f"{rng.choice(_SCHEMES)}{gap}{SECRET}"}
        elif kind == "params non-finite":
            model["params"] = {rng.choice(["temperature", "top_p", "extra"]): _nested_non_finite(rng, rng.randrange(4))}
        elif kind == "float non-finite":
            value = rng.choice([float("nan"), float("inf"), float("-inf")])
            where = rng.choice(["timeout_s", "retry.max_wait_s", "retry.backoff_base_s", "engine.timeout_s",
                                "engine.flush_seconds"])
            if where.startswith("engine."):
                top["engine"] = {where.split(".")[1]: value}
            elif where.startswith("retry."):
                model["retry"] = {where.split(".")[1]: value}
            else:
                model[where] = value
        elif kind == "tpm too small":
            cap = rng.randrange(2, 4000)
            model["params"] = {"max_tokens": cap}
            model["limits"] = {"tpm": rng.randrange(1, min(cap, 4096))}
        elif kind == "path system":
            top[rng.choice(["output", "cache"])] = (rng.choice(["/proc", "/sys", "/dev", "/proc/self/cwd",
                                                                "/proc/self/root/tmp"]) + "/" + f"out{i}")
        else:
            top[rng.choice(["output", "cache"])] = _insert(rng, f"out{i}", rng.choice(_CONTROLS))
        yield f"{kind} #{i}", {"models": [model], **top}


def non_string_keys(rng: random.Random, n: int) -> Iterator[tuple[str, str]]:
    """YAML text appended to a valid sweep: a mapping key that is no string, at the top or nested."""
    keys = ["1", "-3", "3.5", "yes", "no", "on", "null", "~", "true", "0x1F", "2026-12-01", "[a, b]", "{a: 1}", ".inf"]
    for i in range(n):
        key = rng.choice(keys)
        text = f"? {key}\n: x\n" if key.startswith(("[", "{")) else f"{key}: x\n"
        if i % 2:
            text = "engine:\n  concurrency: 4\n  " + text.replace("\n: x", "\n  : x")
        yield f"non-string key {key!r} #{i}", text


# -- building the cases ------------------------------------------------------------------------------------------

def sweep_with(tmp: Path, name: str, *, cases: str | None = None, catalogue: str | None = None,
               kind: str = "misselection") -> Path:
    data = quickstart_dict()
    probe = data["probes"][0]
    if kind == "negative":
        probe.update(kind="negative", cases=str(CONFIGS / "negative" / "cases.yaml"),
                     catalogue=str(CONFIGS / "negative" / "tools.json"))
    if cases is not None:
        probe["cases"] = cases
    if catalogue is not None:
        probe["catalogue"] = catalogue
    path = tmp / f"{name}.sweep.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def dump(path: Path, content: bytes | str | Any) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8", errors="surrogatepass")
    else:
        path.write_text(yaml.safe_dump(content, sort_keys=False, allow_unicode=True) if path.suffix == ".yaml"
                        else json.dumps(content))
    return path


FAKE_MCP = """import sys, json
replies = json.loads(sys.argv[1])
for reply in replies:
    line = sys.stdin.readline()
    if not line:
        break
    sys.stdout.write(reply + "\\n")
    sys.stdout.flush()
sys.stdin.readline()
"""

_INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-06-18",
                                                          "capabilities": {"tools": {}}}})


def mcp_replies() -> Iterator[tuple[str, list[str]]]:
    def tools(result: Any) -> str:
        return json.dumps({"jsonrpc": "2.0", "id": 2, "result": result})

    yield "not json", ["hello from the server"]
    yield "json array", ["[1, 2, 3]"]
    yield "binary", ["\udcff\udcfe garbage"]
    yield "no result", [json.dumps({"jsonrpc": "2.0", "id": 1})]
    yield "error object", [json.dumps({"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "\x1b[2Jno"}})]
    yield "error string", [json.dumps({"jsonrpc": "2.0", "id": 1, "error": "nope"})]
    yield "no tools capability", [json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"capabilities": {}}})]
    yield "capabilities not a dict", [json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"capabilities": 5}})]
    yield "exits at once", []
    yield "deep nesting", ['{"a":' * 5000 + "1" + "}" * 5000]
    yield "tools not a list", [_INIT, tools({"tools": "x"})]
    yield "no tools", [_INIT, tools({"tools": []})]
    yield "tool not an object", [_INIT, tools({"tools": [5]})]
    yield "tool without name", [_INIT, tools({"tools": [{"description": "x"}]})]
    yield "tool name not a string", [_INIT, tools({"tools": [{"name": 5, "inputSchema": {}}]})]
    yield "schema not an object", [_INIT, tools({"tools": [{"name": "t", "inputSchema": "x"}]})]
    yield "cursor not a string", [_INIT, tools({"tools": [{"name": "t", "inputSchema": {"type": "object"}}],
                                                "nextCursor": 5})]
    yield "looping cursor", [_INIT, tools({"tools": [{"name": "t", "inputSchema": {"type": "object"}}],
                                           "nextCursor": "c"}),
                             json.dumps({"jsonrpc": "2.0", "id": 3, "result": {"tools": [], "nextCursor": "c"}})]
    yield "result a list", [_INIT, tools([1, 2])]
    yield "answers another id, then exits", [json.dumps({"jsonrpc": "2.0", "id": 99, "result": {}})]


def build_cases(tmp: Path) -> list[Case]:
    rng = random.Random(SEED)
    cases: list[Case] = []
    valid_sweep = (CONFIGS / "quickstart.yaml").read_bytes()
    valid_catalogue = (CONFIGS / "misselection" / "tools.json").read_bytes()
    files = list(whole_files(rng))

    # sweeps: whole files, truncations, devices, mutations
    for i, (label, content) in enumerate([*files, *truncations(valid_sweep, rng, 10)]):
        cases.append(Case("sweep", label, ["validate", str(dump(tmp / f"sweep{i}.yaml", content))]))
    fifo = tmp / "fifo.yaml"
    os.mkfifo(fifo)
    for device in [*DEVICES, str(fifo), str(tmp), str(tmp / "nosuch.yaml")]:
        cases.append(Case("sweep", f"path {device}", ["validate", device]))
    for i, (label, data) in enumerate(sweep_mutations()):
        cases.append(Case("sweep", label, ["validate", str(dump(tmp / f"mut{i}.yaml", data))]))

    # case files: misselection triples (YAML), negative cases (JSON lines)
    for i, (label, content) in enumerate(files):
        triples = dump(tmp / f"triples{i}.yaml", content)
        cases.append(Case("triples", label, ["validate", str(sweep_with(tmp, f"t{i}", cases=str(triples)))]))
    for device in [*DEVICES, str(fifo), str(tmp)]:
        cases.append(Case("triples", f"path {device}", ["validate", str(sweep_with(tmp, f"td{len(cases)}", cases=device))]))
    for i, (label, data) in enumerate(triple_mutations(rng)):
        triples = dump(tmp / f"triplesm{i}.yaml", data)
        cases.append(Case("triples", label, ["validate", str(sweep_with(tmp, f"tm{i}", cases=str(triples)))]))
    for i, (label, content) in enumerate(files):
        jsonl = dump(tmp / f"neg{i}.jsonl", content)
        cases.append(Case("jsonl-cases", label,
                          ["validate", str(sweep_with(tmp, f"n{i}", cases=str(jsonl), kind="negative"))]))

    # catalogues (JSON)
    for i, (label, content) in enumerate([*files, *truncations(valid_catalogue, rng, 8, upto=0.95)]):
        cat = dump(tmp / f"cat{i}.json", content)
        cases.append(Case("catalogue", label, ["validate", str(sweep_with(tmp, f"c{i}", catalogue=str(cat)))]))
    for i, (label, data) in enumerate(catalogue_mutations()):
        cat = dump(tmp / f"catm{i}.json", data)
        cases.append(Case("catalogue", label, ["validate", str(sweep_with(tmp, f"cm{i}", catalogue=str(cat)))]))

    # MCP replies from a fake stdio server
    server = dump(tmp / "fake_mcp.py", FAKE_MCP)
    for i, (label, replies) in enumerate(mcp_replies()):
        data = quickstart_dict()
        probe = data["probes"][0]
        del probe["catalogue"]
        probe["mcp_server"] = {"command": sys.executable, "args": [str(server), json.dumps(replies)], "timeout_s": 2}
        path = dump(tmp / f"mcp{i}.yaml", data)
        cases.append(Case("mcp", label, ["validate", "--start-servers", str(path)]))

    # importers
    bfcl_lines = [json.dumps({"id": "irrelevance_0", "question": "what", "function": []}),
                  json.dumps({"id": "irrelevance_1", "question": [[5]], "function": []}),
                  json.dumps({"id": "irrelevance_2", "question": [[{"role": "user", "content": 5}]], "function": [5]}),
                  json.dumps({"id": "irrelevance_3", "question": [], "function": {}}),
                  json.dumps({"no": "id"}), "[1,2]", "not json"]
    bfcl_inputs = [*files, *((f"entry {line[:30]}", line + "\n") for line in bfcl_lines)]
    for i, (label, content) in enumerate(bfcl_inputs):
        folder = tmp / f"bfcl{i}"
        folder.mkdir()
        path = dump(folder / "BFCL_v4_irrelevance.json", content)
        cases.append(Case("bfcl", label, ["import", "bfcl", str(path), "--out", str(tmp / f"bfclo{i}")]))

    good_stimuli = dump(tmp / "good_stimuli.json", [{"ungroundable": "a", "groundable_known": "b",
                                                     "expected_tool": "fetch_invoices"}])
    stimuli_bad = [*files, ("list of ints", "[1, 2]"), ("missing keys", '[{"ungroundable": "a"}]'),
                   ("wrong types", '[{"ungroundable": 5, "groundable_known": [], "expected_tool": {}}]')]
    for i, (label, content) in enumerate(stimuli_bad):
        path = dump(tmp / f"stim{i}.json", content)
        cases.append(Case("ungrounded-stimuli", label,
                          ["import", "ungrounded", str(path), "--tools", str(CONFIGS / "misselection" / "tools.json"),
                           "--out", str(tmp / f"ungo{i}")]))
    for i, (label, content) in enumerate([*files, ("tools not a catalogue", '{"x": 1}')]):
        path = dump(tmp / f"ungtools{i}.json", content)
        cases.append(Case("ungrounded-tools", label, ["import", "ungrounded", str(good_stimuli), "--tools", str(path),
                                                      "--out", str(tmp / f"ungt{i}")]))

    trials_args = ["--model-name", "m", "--cluster", "case", "--condition", "cond", "--outcome", "hit"]
    trials_bad = [*files, ("header only", "case,cond,hit\n"), ("wrong columns", "a,b\n1,2\n"),
                  ("junk outcomes", "case,cond,hit\nc,a,maybe\nc,b,1\n"),
                  ("null cluster", "case,cond,hit\n,a,1\nc,b,0\n"),
                  ("huge run", "case,cond,hit,run\nc,a,1,99999999999999999999999\n")]
    for i, (label, content) in enumerate(trials_bad):
        path = dump(tmp / f"trials{i}.csv", content)
        extra = ["--run", "run"] if label == "huge run" else []
        cases.append(Case("trials", label, ["import", "trials", str(path), "--out", str(tmp / f"trialso{i}"),
                                            *trials_args, *extra]))
    for device in [*DEVICES, str(fifo), str(tmp)]:
        cases.append(Case("trials", f"path {device}", ["import", "trials", device, "--out", str(tmp / "trialsd"),
                                                       *trials_args]))
    for i, (label, content) in enumerate(files[:12]):
        path = dump(tmp / f"trialsp{i}.parquet", content)
        cases.append(Case("trials", f"parquet {label}", ["import", "trials", str(path), "--out",
                                                         str(tmp / f"trialsq{i}"), *trials_args]))

    for i, (label, content) in enumerate([*files, ("header only", "session_id,task_id\n")]):
        folder = tmp / f"agentprop{i}"
        folder.mkdir()
        dump(folder / "p2_all_rejudged.csv", content)
        cases.append(Case("agentprop", label, ["import", "agentprop", str(folder), "--out", str(tmp / f"apo{i}")]))
    for device in [*DEVICES, str(fifo)]:
        folder = tmp / f"agentpropd{len(cases)}"
        folder.mkdir()
        (folder / "p2_all_rejudged.csv").symlink_to(device)
        cases.append(Case("agentprop", f"path {device}", ["import", "agentprop", str(folder), "--out",
                                                          str(tmp / f"apod{len(cases)}")]))
    settings = tmp / "settings"
    settings.mkdir()
    return cases + build_settings_cases(settings)


SETTINGS_CASES = 144


def build_settings_cases(tmp: Path) -> list[Case]:
    """Generated settings that cannot work and YAML keys that are no string: validated, never sent."""
    rng = random.Random(SEED + 31)
    cases = []
    for i, (label, change) in enumerate(settings_mutations(rng, SETTINGS_CASES)):
        data = quickstart_dict()
        data.pop("engine", None)
        data.update(change)
        cases.append(Case("settings", label, ["validate", str(dump(tmp / f"set{i}.yaml", data))]))
    for i, (label, text) in enumerate(non_string_keys(rng, 24)):
        data = quickstart_dict()
        data.pop("engine", None)
        cases.append(Case("yaml-keys", label, ["validate", str(dump(tmp / f"key{i}.yaml",
                                                                      yaml.safe_dump(data, sort_keys=False) + text))]))
    return cases


def check(result_exit: int, stderr: str, output: str, exception: BaseException | None, case: Case) -> None:
    where = f"{case.kind}: {case.label}"
    assert result_exit == 2, f"{where}: exit {result_exit}\n{output}\n{exception!r}"
    assert "Traceback" not in output, where
    assert exception is None or isinstance(exception, SystemExit), f"{where}: {exception!r}"
    errors = [line for line in stderr.splitlines() if line and not line.startswith(("warning: ", "note: "))]
    assert 1 <= len(errors) <= 20 and all(line.startswith("error: ") for line in errors), f"{where}: {errors}"
    assert all("\x1b" not in line and "\x07" not in line for line in errors), where


def test_fuzzed_settings_are_refused_at_load_without_repeating_a_secret(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """168 generated settings and keys (seeded): each one `error:` line, exit 2, no traceback, the secret it carries never
    printed, nothing written (validate writes nothing; a system or control-character path is refused as written)."""
    monkeypatch.setenv("TG_FUZZ_KEY", "sk-fuzz-key-0123456789")
    monkeypatch.chdir(tmp_path)
    cases = build_settings_cases(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    counts: Counter[str] = Counter()
    for case in cases:
        result = cli.invoke(app, case.args)
        check(result.exit_code, result.stderr, result.output, result.exception, case)
        assert SECRET not in result.output and SECRET[:10] not in result.output, f"{case.label}: {result.output}"
        counts[case.label.split(" #")[0].split(" '")[0]] += 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no output, cache or file of any kind appeared
    assert len(cases) >= 160 and len(counts) >= 12
    print(f"\nsettings fuzz: {len(cases)} inputs {dict(counts)}")


def _cpu_s(args: list[str]) -> tuple[float, Any]:
    """CPU seconds this process spends on ``trialgrid ARGS`` in-process, and the result."""
    start = time.process_time()
    result = cli.invoke(app, args)
    return time.process_time() - start, result


@pytest.mark.slow
def test_fuzzed_bad_input_is_a_clean_exit_2(tmp_path: Path) -> None:
    cases = build_cases(tmp_path)
    good = ["validate", str(CONFIGS / "quickstart.yaml")]
    _cpu_s(good)  # the first call pays the lazy imports
    baseline = sorted(_cpu_s(good)[0] for _ in range(3))[1]
    counts: Counter[str] = Counter()
    slowest = (0.0, "")
    warmed: set[str] = set()
    for case in cases:
        if case.kind not in warmed:  # each command's first call pays its own lazy imports (the importers' readers)
            warmed.add(case.kind)
            _cpu_s(case.args)
        cpu, result = _cpu_s(case.args)
        check(result.exit_code, result.stderr, result.output, result.exception, case)
        if cpu > MAX_CPU_RATIO * baseline:
            # once more before judging: a first path through a module compiles its bytecode (a fresh clone) or
            # meets a collector pause; an input that really costs too much costs it again
            cpu = min(cpu, _cpu_s(case.args)[0])
        assert cpu <= MAX_CPU_RATIO * baseline, (f"{case.kind}: {case.label} took {cpu:.2f} s of CPU, "
                                                 f"{cpu / baseline:.0f}x a valid sweep's {baseline:.3f} s")
        slowest = max(slowest, (cpu, f"{case.kind}: {case.label}"))
        counts[case.kind] += 1
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nfuzz: {sum(counts.values())} inputs {dict(counts)}; slowest {slowest[0]:.2f} s of CPU ({slowest[1]}), "
          f"a valid sweep {baseline:.3f} s; peak RSS of the whole test process {rss_mb:.0f} MB")
    assert sum(counts.values()) >= 300


#: in a real process: start-up and imports (~1 s of CPU) are in the baseline too, so the ratio is smaller
REAL_PROCESS_CPU_RATIO = 3.0
SUBPROCESS_LIMIT_AS = 4 << 30  # virtual memory: the imports alone reserve far more than they touch


_MEASURE = """import resource, subprocess, sys
limit = int(sys.argv[1])
def cap():
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
proc = subprocess.run(sys.argv[2:], preexec_fn=cap, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
sys.stderr.buffer.write(proc.stderr)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(proc.returncode, usage.ru_maxrss, usage.ru_utime + usage.ru_stime)
"""


def run_bounded(args: list[str], env: dict[str, str]) -> tuple[int, str, float, float]:
    """Run ``python -m runner ARGS`` under RLIMIT_AS, measured by a fresh parent whose only child it is:
    (exit, stderr, CPU seconds, peak RSS MB). A hang is the measuring parent's 60 s timeout."""
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(SUBPROCESS_LIMIT_AS), sys.executable, "-m", "runner",
                           *args], capture_output=True, cwd=ROOT, env=env, timeout=90)
    code, rss_kb, cpu = done.stdout.decode().split()
    return int(code), done.stderr.decode("utf-8", "replace"), float(cpu), int(rss_kb) / 1024


@pytest.fixture(scope="module")
def startup_cpu_s() -> float:
    """CPU seconds of a real ``trialgrid validate`` of the bundled quickstart: start-up, imports, one valid sweep."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code, stderr, cpu, _ = run_bounded(["validate", str(CONFIGS / "quickstart.yaml")], env)
    assert code == 0, stderr
    return cpu


@pytest.mark.slow
@pytest.mark.parametrize("what", ["alias bomb", "params alias bomb", "/dev/zero", "deep nesting", "big file",
                                  "bfcl deep nesting", "trials /dev/zero", "trials fifo", "trials big file",
                                  "trials huge line", "trials binary", "agentprop fifo", "agentprop /dev/zero labels"])
def test_bounds_hold_in_a_real_process(tmp_path: Path, what: str, startup_cpu_s: float) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    trials = ["--model-name", "m", "--cluster", "case", "--condition", "cond", "--outcome", "hit",
              "--out", str(tmp_path / "o")]
    if what == "alias bomb":
        args = ["validate", str(dump(tmp_path / "s.yaml", "name: b\n" + alias_bomb(9, 9)))]
    elif what == "params alias bomb":
        text = ("name: b\nmodels:\n  - name: m\n    provider: sim\n    params:\n      "
                + alias_bomb(9, 9).replace("\n", "\n      ") + "\nprobes: []\n")
        args = ["validate", str(dump(tmp_path / "s.yaml", text))]
    elif what == "/dev/zero":
        args = ["validate", "/dev/zero"]
    elif what == "deep nesting":
        args = ["validate", str(dump(tmp_path / "s.yaml", "[" * 1_000_000))]
    elif what == "big file":
        path = tmp_path / "s.yaml"
        with path.open("w") as fh:
            fh.write("k: [" + "1, " * (20 << 20) + "]\n")  # 60 MB, over the 16 MiB cap
        args = ["validate", str(path)]
    elif what == "trials /dev/zero":
        args = ["import", "trials", "/dev/zero", *trials]
    elif what == "trials fifo":  # opened, it would block for ever (no writer): the timeout would fail the test
        os.mkfifo(tmp_path / "t.csv")
        args = ["import", "trials", str(tmp_path / "t.csv"), *trials]
    elif what == "trials big file":  # over the cap: refused by its size, never read
        env["TRIALGRID_MAX_INPUT_MB"] = "8"
        args = ["import", "trials", str(dump(tmp_path / "t.csv", "case,cond,hit\n" + "c,a,1\n" * (2 << 20))), *trials]
    elif what == "trials huge line":  # within the cap, one 40 MB cell: refused before any column is worked on
        env["TRIALGRID_MAX_INPUT_MB"] = "48"
        args = ["import", "trials", str(dump(tmp_path / "t.csv", "case,cond,hit\n" + "x" * (40 << 20))), *trials]
    elif what == "trials binary":
        args = ["import", "trials", str(dump(tmp_path / "t.csv", b"case,cond,hit\n" + os.urandom(8 << 20))),
                *trials]
    elif what == "agentprop fifo":
        (tmp_path / "a").mkdir()
        os.mkfifo(tmp_path / "a" / "p2_all_rejudged.csv")
        args = ["import", "agentprop", str(tmp_path / "a"), "--out", str(tmp_path / "o")]
    elif what == "agentprop /dev/zero labels":  # copied beside the run: it must not fill the disk
        (tmp_path / "a").mkdir()
        columns = ("session_id,model,injection_type,heuristic_correct,candidate,reference,gpt4o_verdict,"
                   "gemini_25_flash_verdict,gpt4o_mini_verdict\n")
        dump(tmp_path / "a" / "ensemble_judge.csv", columns + "s1,m,x,true,a,b,true,false,true\n")
        (tmp_path / "a" / "human_labels_zero.csv").symlink_to("/dev/zero")
        args = ["import", "agentprop", str(tmp_path / "a"), "--out", str(tmp_path / "o")]
    else:
        folder = tmp_path / "b"
        folder.mkdir()
        args = ["import", "bfcl", str(dump(folder / "BFCL_v4_irrelevance.json", '{"id": ' + "[" * 200_000 + "\n")),
                "--out", str(tmp_path / "o")]
    code, stderr, cpu, rss = run_bounded(args, env)
    print(f"\n{what}: exit {code} after {cpu:.2f} s of CPU ({cpu / startup_cpu_s:.1f}x a valid sweep's), "
          f"peak RSS {rss:.0f} MB: {stderr.strip()[:160]}")
    assert code == 2 and "Traceback" not in stderr, stderr
    assert [line for line in stderr.splitlines() if line][-1].startswith("error: ")
    # start-up and imports are most of both; what the input adds must stay within a few times that
    assert cpu <= REAL_PROCESS_CPU_RATIO * startup_cpu_s, (cpu, startup_cpu_s)
    assert rss < MAX_RSS_MB


def test_no_generated_label_writes_outside_its_directory(tmp_path: Path) -> None:
    """Property: whatever a label holds, the files named after it stay inside the target directory, and no two
    labels share a file name, even on a file system that ignores case."""
    from runner.core.safety import confined, safe_filename

    rng = random.Random(SEED)
    alphabet = ["/", "\\", ".", "..", "~", "\x00", "\n", " ", "a", "A", "z", "Z", "-", "_", ":", "*", "é", "É", "\u202e",
                "$", "%2e"]
    seen: dict[str, str] = {}
    folded: dict[str, str] = {}  # macOS and Windows compare file names without case
    target = tmp_path / "target"
    target.mkdir()
    for i in range(3000):
        label = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
        name = safe_filename(label)
        assert seen.setdefault(name, label) == label, f"{label!r} and {seen[name]!r} share {name!r}"
        assert folded.setdefault(name.casefold(), label) == label, \
            f"{label!r} and {folded[name.casefold()]!r} share {name!r} where case is ignored"
        for pattern in ("{}.svg", "{}.disagreements.jsonl", "view.{}.x.csv"):
            path = confined(target, pattern.format(name))
            assert path.resolve().parent == target.resolve()
            if i % 10 == 0:  # and the file system agrees: 900 files written (9,000 were, for the same property)
                path.write_text("x")
    escaped = [p for p in tmp_path.rglob("*") if target not in p.parents and p != target]
    assert escaped == []


def test_every_label_writing_command_stays_in_its_directory(tmp_path: Path) -> None:
    """End to end: hostile model and probe labels, run + report --csv --badge, nothing outside the targets."""
    labels = ["../../x", "/tmp/trialgrid-i13-abs", "a/b", "..", "nosuchdir/y", "=cmd|' /C calc'!A0", "CON", ".hidden"]
    data = quickstart_dict()
    data["probes"][0]["runs"] = 1  # every label's files are written whatever the run count (it was 5: 1,560 trials)
    data["probes"][0]["name"] = "../../probe"
    data["models"] = [{"name": label, "provider": "sim", "model": "typical"} for label in labels]
    work = tmp_path / "w" / "w"
    work.mkdir(parents=True)
    sweep = dump(work / "s.yaml", data)
    out = work / "out"
    assert cli.invoke(app, ["run", str(sweep), "--out", str(out), "-q"]).exit_code == 0
    result = cli.invoke(app, ["report", str(out), "-q", "--csv", str(work / "csv"), "--badge", str(work / "badges"),
                              "--json", str(work / "s.json"), "--html", str(work / "s.html")])
    assert result.exit_code == 0, result.output
    allowed = (out, work / "csv", work / "badges")
    stray = [p for p in tmp_path.rglob("*") if p.is_file() and not any(a in p.parents for a in allowed)
             and p.parent != work]
    assert stray == [] and not Path("/tmp/trialgrid-i13-abs.svg").exists()
    assert len(list((work / "badges").glob("*.svg"))) == len(labels)

