"""An MCP client of `agentroom serve`'s `/mcp` built on the official Python MCP SDK (PyPI `mcp`,
2.x), run by crates/cli/tests/mcp_http.rs with the venv `.ci/run` makes.

Environment: AGENTROOM_MCP_URL (the `/mcp` endpoint), AGENTROOM_TOKEN (the bearer token),
AGENTROOM_MCP_TEXT (the owner message to post). It lists the tools, calls `room_overview` and
`post_owner_message` and `room_overview` with an unknown field, and prints one JSON object:
the tool names, each result's structured content and error flag. Any failure is a traceback
on stderr and a failing exit.
"""

import asyncio
import json
import os
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def result(answer):
    return {"is_error": bool(answer.is_error), "content": answer.structured_content}


async def main():
    url = os.environ["AGENTROOM_MCP_URL"]
    token = os.environ["AGENTROOM_TOKEN"]
    text = os.environ["AGENTROOM_MCP_TEXT"]
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            tools = await client.list_tools()
            overview = await client.call_tool("room_overview", {})
            posted = await client.call_tool(
                "post_owner_message", {"text": text, "idempotency_key": "python-sdk"}
            )
            refused = await client.call_tool("room_overview", {"unknown": 1})
            print(
                json.dumps(
                    {
                        "tools": sorted(tool.name for tool in tools.tools),
                        "room_overview": result(overview),
                        "post_owner_message": result(posted),
                        "unknown_field": result(refused),
                    }
                )
            )


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except httpx2.HTTPError as error:
        print(f"HTTP error: {error!r}", file=sys.stderr)
        raise
