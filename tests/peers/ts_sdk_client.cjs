#!/usr/bin/env node
// A legacy MCP client written with the TypeScript SDK (`@modelcontextprotocol/sdk` 1.x), for the
// reverse direction's tests: run it with NODE_PATH pointing at a pinned SDK's node_modules
// (.tools/ts-peers/sdk-<version>/, installed by `make ts-peers`):
//
//   NODE_PATH=.tools/ts-peers/sdk-1.13.3/node_modules node tests/peers/ts_sdk_client.cjs URL
//
// Connects over Streamable HTTP declaring elicitation, sampling and roots; answers an elicitation
// by accepting {answer, name, color, topic} = "Ada", roots with two URIs; calls the interactive
// contract's `echo`, `ask`, `ask_twice` and `roots`, reads `interactive://ask/t1` and gets prompt
// `ask_prompt`; prints one JSON line: the negotiated version and, per scenario, its text (or error)
// and the inputs it was asked.
"use strict";

const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const types = require("@modelcontextprotocol/sdk/types.js");

const ANSWER = "Ada";

async function main() {
  const url = new URL(process.argv[2]);
  const client = new Client(
    { name: "ts-legacy-client", version: "1.0.0" },
    { capabilities: { elicitation: {}, sampling: {}, roots: {} } },
  );
  let asked = [];
  client.setRequestHandler(types.ElicitRequestSchema, async (request) => {
    asked.push({ method: "elicitation/create", message: request.params.message });
    const content = { answer: ANSWER, name: ANSWER, color: ANSWER, topic: ANSWER };
    return { action: "accept", content };
  });
  client.setRequestHandler(types.ListRootsRequestSchema, async () => {
    asked.push({ method: "roots/list" });
    return { roots: [{ uri: "file:///work/a" }, { uri: "file:///b" }] };
  });
  const transport = new StreamableHTTPClientTransport(url);
  await client.connect(transport);
  const scenarios = {
    echo: () => client.callTool({ name: "echo", arguments: { text: "unchanged" } }),
    ask: () => client.callTool({ name: "ask", arguments: { tag: "t1" } }),
    ask_twice: () => client.callTool({ name: "ask_twice", arguments: { tag: "t1" } }),
    roots: () => client.callTool({ name: "roots", arguments: { tag: "t1" } }),
    resource: () => client.readResource({ uri: "interactive://ask/t1" }),
    prompt: () => client.getPrompt({ name: "ask_prompt", arguments: { tag: "t1" } }),
  };
  const outcomes = {};
  for (const [name, run] of Object.entries(scenarios)) {
    asked = [];
    try {
      const result = await run();
      const first = result.content?.[0] ?? result.contents?.[0] ?? result.messages?.[0]?.content;
      outcomes[name] = { text: first?.text ?? "?", asked };
    } catch (error) {
      outcomes[name] = { error: { code: error.code, message: error.message }, asked };
    }
  }
  const version = transport.protocolVersion ?? null;
  await client.close();
  process.stdout.write(JSON.stringify({ protocolVersion: version, outcomes }) + "\n");
}

main().catch((error) => {
  process.stderr.write(`${error.stack ?? error}\n`);
  process.exit(1);
});
