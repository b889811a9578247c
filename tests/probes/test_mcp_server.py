"""An MCP server built with the official ``mcp`` SDK, serving a catalogue file page by page.

Run as a script it is the stdio server the MCP-catalogue tests start
(``python test_mcp_server.py CATALOGUE --page-size 4 [--mode ...]``); imported by
pytest, its one test checks the server against the SDK's own client, so the
trialgrid client is tested against a server the SDK itself agrees is well formed.

Modes make the failures trialgrid must report: ``crash`` (exit before the
handshake), ``hang`` (never answer tools/list), ``malformed`` (one tool's
``required`` names an argument it does not define), ``stdout-noise`` (a non-JSON line on the wire).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

HERE = Path(__file__).resolve()
QUICKSTART_TOOLS = HERE.parents[2] / "configs" / "misselection" / "tools.json"


def mcp_tools(path: Path) -> list[dict[str, Any]]:
    """The catalogue file's tools in MCP form (name, description, inputSchema)."""
    out = []
    for entry in json.loads(path.read_text()):
        fn = entry.get("function", entry)
        out.append({"name": fn["name"], "description": fn.get("description", ""),
                    "inputSchema": fn.get("parameters") or fn.get("input_schema") or fn.get("inputSchema")})
    return out


def build_server(tools: list[dict[str, Any]], page_size: int, mode: str) -> Any:
    import mcp_types as types
    from mcp.server.lowlevel import Server

    served = [types.Tool(name=t["name"], description=t["description"], input_schema=t["inputSchema"]) for t in tools]
    if mode == "malformed":  # the SDK accepts it; trialgrid must not: `required` names an undefined argument
        schema = {**tools[2]["inputSchema"], "required": ["ticket_priority"]}
        served[2] = types.Tool(name=served[2].name, description=served[2].description, input_schema=schema)

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        if mode == "hang":
            await anyio.sleep_forever()
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + page_size
        return types.ListToolsResult(tools=served[start:end], next_cursor=str(end) if end < len(served) else None)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        # trialgrid never calls a tool; if it ever does, the test that reads this file fails
        if os.environ.get("TG_MCP_CALLS"):
            Path(os.environ["TG_MCP_CALLS"]).write_text(params.name)
        return types.CallToolResult(content=[types.TextContent(type="text", text="called")])

    return Server("trialgrid-test-catalogue", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("catalogue", type=Path)
    parser.add_argument("--page-size", type=int, default=4)
    parser.add_argument("--mode", choices=("ok", "crash", "hang", "malformed", "stdout-noise"), default="ok")
    parser.add_argument("--pidfile", type=Path)
    args = parser.parse_args(argv)
    if args.pidfile:
        args.pidfile.write_text(str(os.getpid()))
    if args.mode == "crash":
        print("catalogue backend unreachable: connection refused", file=sys.stderr)
        sys.exit(3)
    if args.mode == "stdout-noise":
        print("starting server v1.0 ...", flush=True)  # the classic bug: logging to stdout
    from mcp.server.stdio import stdio_server

    server = build_server(mcp_tools(args.catalogue), args.page_size, args.mode)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


@pytest.mark.timeout(60)
def test_sdk_client_pages_through_the_served_catalogue() -> None:
    import mcp_types as types
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def fetch() -> list[str]:
        params = StdioServerParameters(command=sys.executable, args=[str(HERE), str(QUICKSTART_TOOLS), "--page-size", "5"])
        names: list[str] = []
        pages = 0
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            cursor = None
            while True:
                result = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
                pages += 1
                names += [t.name for t in result.tools]
                cursor = result.next_cursor
                if cursor is None:
                    break
        assert pages == 3  # 13 tools, 5 a page
        return names

    names = anyio.run(fetch)
    assert names == [t["name"] for t in mcp_tools(QUICKSTART_TOOLS)]


if __name__ == "__main__":
    main(sys.argv[1:])
