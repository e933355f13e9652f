python3 -m interlock.mcp_proxy --config interlock.mcp.json -- python3 payments_server.py
