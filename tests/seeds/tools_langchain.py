# LangChain or LangGraph: BaseTool in, BaseTool out
from interlock.langchain_tools import protect_tools
tools = protect_tools([get_order, create_refund, find_refund], config)
tools.recover()
