"""A real MCP server for the test command: the official Python SDK (`mcp`), Streamable HTTP
on loopback, serving a read tool, a write tool, and a read tool that reports what the write
tool did.

    python tests/mcp_server.py PORT

scripts/mcp.sh starts it (in its own venv), waits for it and exports SWITCHYARD_MCP_URL;
tests/mcp_python.rs drives it through Switchyard's MCP client. The write tool keeps every
call with the idempotency key the client sent in `_meta`, so a test can see that a write was
made once.
"""

import asyncio
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("switchyard-test-orders")

ORDERS = {"A-1": "shipped on 2026-11-30", "A-2": "waiting for stock"}
REFUNDS: list[dict] = []


@server.tool(description="Where an order is: its shipping status.")
def lookup_order(order_id: str) -> str:
    status = ORDERS.get(order_id)
    if status is None:
        raise ToolError(f"no order {order_id}")
    return f"order {order_id} {status}"


@server.tool(description="Refund part of an order. Changes the order: call it once per refund.")
def issue_refund(order_id: str, amount: float, ctx: Context) -> str:
    meta = ctx.request_context.meta or {}
    REFUNDS.append({"order_id": order_id, "amount": amount, "key": meta.get("idempotency_key")})
    return f"refund of {amount:g} for order {order_id} issued"


@server.tool(description="The refunds issued so far, with the idempotency key of each.")
def refunds_issued() -> str:
    return "; ".join(f"{r['order_id']} {r['amount']:g} key={r['key']}" for r in REFUNDS) or "none"


if __name__ == "__main__":
    asyncio.run(server.run_streamable_http_async(host="127.0.0.1", port=int(sys.argv[1])))
