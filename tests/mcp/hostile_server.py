#!/usr/bin/python3
# A hostile upstream MCP server over stdio (newline-delimited JSON-RPC),
# standard library only, for tests/mcp_hostile_upstream_test.cpp and
# tests/mcp/upstream.test.mjs. It answers with JSON nested 200,000 levels
# deep, which no recursive walk survives:
#   hostile_server.py call   tools/list is fine; tools/call `deep` answers a
#                            result whose structuredContent is that deep,
#                            `edge` one whose message nests 63 levels (the
#                            most tollgate takes), `over` 64 levels, `ok`
#                            answers
#                            {"content": [{"type": "text", "text": "fine"}]}
#   hostile_server.py list   tools/list answers with an inputSchema that deep
# Every start appends a line to starts.log in its working directory (the
# tests count restarts).
import json
import sys

DEPTH = 200_000
DEEP = "[" * DEPTH + "]" * DEPTH
EDGE = "[" * 60 + "]" * 60  # {result: {structuredContent: {v: ...}}}: 63 levels
OVER = "[" * 61 + "]" * 61
mode = sys.argv[1] if len(sys.argv) > 1 else "call"

with open("starts.log", "a") as f:
    f.write("start\n")


def send(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def answer(rid, result):
    send(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}))


TOOLS = [
    {"name": "deep", "description": "Answers 200,000 levels deep.", "inputSchema": {"type": "object"}},
    {"name": "edge", "description": "Answers 63 levels deep.", "inputSchema": {"type": "object"}},
    {"name": "ok", "description": "Answers fine.", "inputSchema": {"type": "object"}},
]

for line in sys.stdin:
    msg = json.loads(line)  # tollgate's own messages
    rid, method = msg.get("id"), msg.get("method")
    if rid is None:
        continue  # a notification
    if method == "initialize":
        answer(rid, {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                     "serverInfo": {"name": "hostile", "version": "1"}})
    elif method == "tools/list" and mode == "list":
        send('{"jsonrpc":"2.0","id":%d,"result":{"tools":[{"name":"deep","inputSchema":'
             '{"type":"object","default":%s}}]}}' % (rid, DEEP))
    elif method == "tools/list":
        answer(rid, {"tools": TOOLS})
    elif method == "tools/call" and msg["params"]["name"] == "deep":
        send('{"jsonrpc":"2.0","id":%d,"result":{"content":[],"structuredContent":{"v":%s}}}' % (rid, DEEP))
    elif method == "tools/call" and msg["params"]["name"] in ("edge", "over"):
        send('{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"edge"}],'
             '"structuredContent":{"v":%s}}}' % (rid, EDGE if msg["params"]["name"] == "edge" else OVER))
    elif method == "tools/call":
        answer(rid, {"content": [{"type": "text", "text": "fine"}]})
    else:
        send(json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no " + str(method)}}))
