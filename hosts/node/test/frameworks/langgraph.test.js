// The LangGraph.js with and without Interlock: the four rows of the original's table
// (scenarios.js), each cell by a test. Real kills (SIGKILL) of worker processes running
// the prebuilt ReAct agent with the SQLite checkpointer (resumed after the kill) and LangChain's fake chat model.
import { test } from 'node:test';
import { rowTests } from './scenarios.js';

rowTests(test, 'langgraph');
