"""A specialist or reviewer agent of a Room, as an MCP host runs one: the official Python MCP
SDK (PyPI `mcp`, 2.x) over `agentroom serve`'s streamable HTTP `/mcp`, run by
crates/cli/tests/mcp_objective.rs. It works only from what the tools answer it: nothing about
the objective is written here.

Environment: AGENTROOM_MCP_URL (the `/mcp` endpoint), AGENTROOM_TOKEN (its bearer token),
AGENTROOM_AGENT_ROLE (`specialist` or `reviewer`). It polls until the test kills it, and
prints one JSON line per thing it did (`{"did": ..., ...}`).

- specialist: for each assignment, the corpus lines (`[sN] uri | title | sentence`) found in
  what the assignment holds become facts `- sentence [sN]`, each line cited as a document
  source whose excerpt is the sentence; the outputs its capability declares (in what it was
  sent) are filled from them by type; then `submit_result`.
- reviewer: for each objective, `read_report`; when its latest version awaits review,
  a criterion whose text quotes a phrase is met when a source's excerpt holds it (quoting it,
  citing that source), a criterion without one when every fact line of the report cites a
  source (quoting a cited excerpt's first line); else unmet. Then `record_review` with the
  revisions the report was read at.
"""

import asyncio
import hashlib
import json
import os
import re
import sys

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

CORPUS_LINE = re.compile(r"\[(s\d+)\]\s+(\S+)\s+\|\s+([^|\n]+?)\s+\|\s+([^\n]+)")
QUOTED = re.compile(r'"([^"]+)"')


def say(**what):
    print(json.dumps(what), flush=True)


def strings(value):
    """Every string in a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


async def call(client, tool, arguments):
    answer = await client.call_tool(tool, arguments)
    return bool(answer.is_error), answer.structured_content


async def specialist(client):
    done = set()
    while True:
        failed, listed = await call(client, "list_my_assignments", {})
        if failed:
            say(did="error", tool="list_my_assignments", content=listed)
        for assignment in (listed or {}).get("assignments", []):
            operation = assignment["operation"]
            if operation in done:
                continue
            corpus = {}
            for text in strings([assignment["task"], assignment["context"]]):
                for sid, uri, title, sentence in CORPUS_LINE.findall(text):
                    corpus.setdefault(sid, (uri, title, sentence.strip()))
            facts = [f"- {sentence} [{sid}]" for sid, (_, _, sentence) in sorted(corpus.items())]
            sources = [
                {
                    "kind": "document",
                    "id": sid,
                    "uri": uri,
                    "title": title,
                    "excerpt": sentence,
                    "retrieved_at": 1_767_225_600_000,
                    "content_digest": "sha256:" + hashlib.sha256(sentence.encode()).hexdigest(),
                }
                for sid, (uri, title, sentence) in sorted(corpus.items())
            ]
            body = "Findings:\n" + "\n".join(facts) if facts else "Nothing found."
            outputs = {}
            for item in assignment["context"].get("items", []):
                if item.get("kind") == "capability":
                    for field in json.loads(item["text"]).get("outputs", []):
                        outputs[field["name"]] = {
                            "array": facts,
                            "object": {},
                            "number": len(facts),
                            "integer": len(facts),
                            "boolean": True,
                        }.get(field["kind"], body)
            failed, answer = await call(
                client,
                "submit_result",
                {
                    "operation": operation,
                    "result": {
                        "outcome": "contribution",
                        "body": body,
                        "sources": sources,
                        "outputs": outputs,
                        "usage_micros": 700,
                    },
                },
            )
            done.add(operation)
            say(did="submit_result", operation=operation, facts=len(facts), error=failed, answer=answer)
        # Well under the per-token request rate of `/mcp` (20 a second).
        await asyncio.sleep(0.2)


def verdict(criterion, report):
    sources = report.get("sources") or []
    text = criterion.get("text", "")
    phrase = QUOTED.search(text)
    if phrase:
        for source in sources:
            if source.get("id") and phrase.group(1) in (source.get("excerpt") or ""):
                return {
                    "criterion": criterion["id"],
                    "verdict": "met",
                    "evidence": f"source {source['id']} states it",
                    "sources": [source["id"]],
                    "quote": phrase.group(1),
                }
        return {"criterion": criterion["id"], "verdict": "unmet", "evidence": "no source states it"}
    lines = [line for line in (report.get("body") or "").splitlines() if line.startswith("- ")]
    cited = [source for source in sources if source.get("id") and source.get("excerpt")]
    if lines and cited and all(re.search(r"\[s\d+\]", line) for line in lines):
        first = cited[0]
        return {
            "criterion": criterion["id"],
            "verdict": "met",
            "evidence": "every fact line of the report cites a source",
            "sources": [first["id"]],
            "quote": first["excerpt"].splitlines()[0],
        }
    return {"criterion": criterion["id"], "verdict": "unmet", "evidence": "a claim cites nothing"}


async def reviewer(client):
    reviewed = set()
    while True:
        failed, listed = await call(client, "list_objectives", {})
        for objective in (listed or {}).get("objectives", []):
            failed, report = await call(client, "read_report", {"objective": objective["id"]})
            if failed:
                continue
            key = (objective["id"], report["version"])
            if key in reviewed or not report.get("awaiting_review"):
                continue
            verdicts = [verdict(c, report) for c in report.get("criteria", [])]
            failed, answer = await call(
                client,
                "record_review",
                {
                    "objective": objective["id"],
                    "report_version": report["version"],
                    "observed": report["observed"],
                    "verdicts": verdicts,
                },
            )
            reviewed.add(key)
            say(did="record_review", objective=objective["id"], version=report["version"],
                verdicts=verdicts, error=failed, answer=answer)
        # Well under the per-token request rate of `/mcp` (20 a second).
        await asyncio.sleep(0.2)


async def main():
    url = os.environ["AGENTROOM_MCP_URL"]
    token = os.environ["AGENTROOM_TOKEN"]
    role = os.environ["AGENTROOM_AGENT_ROLE"]
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            say(did="connected", role=role)
            await (specialist(client) if role == "specialist" else reviewer(client))


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
