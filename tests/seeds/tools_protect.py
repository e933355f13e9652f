# OpenAI or Anthropic tool loops; config is the same as interlock.mcp.json
from interlock.tools import protect
tools = protect({"get_order": get_order, "create_refund": create_refund, "find_refund": find_refund}, config)
tools.recover() # once, on startup
out = tools["create_refund"](order_id="881", amount=20) # hand out["message"] back to the model
