// LangGraph.js alone and with Interlock inside: results/frameworks/langgraph-js.json.
// node experiments/frameworks/langgraph-js.mjs [--quick]
import { main } from './js-runner.mjs';

await main({ framework: 'LangGraph.js', package: '@langchain/langgraph', driver: 'langgraph', file: 'langgraph-js' });
