#!/usr/bin/env node
// A legacy MCP server written with the TypeScript SDK (`@modelcontextprotocol/sdk` 1.x), for the
// integration tests of old SDK releases. `make` installs each pinned SDK version into its own folder
// (.tools/ts-peers/sdk-<version>/, see the Makefile); run this script with NODE_PATH pointing at that
// folder's node_modules, so `require` loads exactly that version:
//
//   NODE_PATH=.tools/ts-peers/sdk-1.13.3/node_modules node tests/peers/ts_sdk_server.cjs --transport http --port 8931
//
// Transports: `http` (Streamable HTTP at /mcp, one Server per session), `sse` (the HTTP+SSE transport:
// GET /sse, POST /messages?sessionId=..., one Server per connection) and `stdio`. Every server speaks
// its SDK's own latest revision (1.12: 2025-03-26, 1.13: 2025-06-18).
//
// Tools: `echo(text)`; `sdk()` (the SDK version and its latest revision, as JSON); `ask(question)`: a form
// elicitation (SDKs that have it), returns {action, content} as JSON; `sample(prompt)`: sampling,
// returns the reply text; `roots()`: roots/list, returns the URIs as JSON; `caps()`: the client
// capabilities the session declared, as JSON. Pushes are sent related to
// the call (on its own stream over Streamable HTTP) with a 10-minute timeout, as docs/operations.md ("Legacy push
// timeouts") advises for held calls.
"use strict";

const http = require("node:http");
const { randomUUID } = require("node:crypto");
const { Server } = require("@modelcontextprotocol/sdk/server/index.js");
const { StdioServerTransport } = require("@modelcontextprotocol/sdk/server/stdio.js");
const { SSEServerTransport } = require("@modelcontextprotocol/sdk/server/sse.js");
const { StreamableHTTPServerTransport } = require("@modelcontextprotocol/sdk/server/streamableHttp.js");
const types = require("@modelcontextprotocol/sdk/types.js");
const fs = require("node:fs");
const path = require("node:path");

// The SDK's package.json is not exported; read it next to the module that was loaded.
const sdkRoot = path.resolve(path.dirname(require.resolve("@modelcontextprotocol/sdk/server/index.js")), "../../..");
const sdkVersion = JSON.parse(fs.readFileSync(path.join(sdkRoot, "package.json"), "utf8")).version;

const PUSH_TIMEOUT_MS = 10 * 60 * 1000;
const ANSWER_SCHEMA = { type: "object", properties: { answer: { type: "string" } }, required: ["answer"] };
const text = (value) => ({ content: [{ type: "text", text: value }] });
const object = (properties, required = []) => ({ type: "object", properties, required });

const TOOLS = [
  { name: "echo", description: "Echo the text", inputSchema: object({ text: { type: "string" } }, ["text"]) },
  { name: "sdk", description: "The SDK version and its latest protocol revision", inputSchema: object({}) },
  { name: "ask", description: "Ask the user a question (elicitation)", inputSchema: object({ question: { type: "string" } }, ["question"]) },
  { name: "sample", description: "Ask the client's model (sampling)", inputSchema: object({ prompt: { type: "string" } }, ["prompt"]) },
  { name: "roots", description: "List the client's roots", inputSchema: object({}) },
  { name: "caps", description: "The client capabilities of this session", inputSchema: object({}) },
];

function newServer() {
  const server = new Server({ name: "mrtr-ts-sdk-peer", version: sdkVersion }, { capabilities: { tools: {} } });
  server.setRequestHandler(types.ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler(types.CallToolRequestSchema, async (request, extra) => {
    const args = request.params.arguments || {};
    const options = { timeout: PUSH_TIMEOUT_MS, relatedRequestId: extra.requestId };
    switch (request.params.name) {
      case "echo":
        return text(String(args.text));
      case "sdk":
        return text(JSON.stringify({ sdk: sdkVersion, revision: types.LATEST_PROTOCOL_VERSION }));
      case "ask": {
        if (typeof server.elicitInput !== "function") throw new Error(`SDK ${sdkVersion} has no elicitation`);
        const answer = await server.elicitInput({ message: String(args.question), requestedSchema: ANSWER_SCHEMA }, options);
        return text(JSON.stringify({ action: answer.action, content: answer.content }));
      }
      case "sample": {
        const params = { messages: [{ role: "user", content: { type: "text", text: String(args.prompt) } }], maxTokens: 50 };
        const reply = await server.createMessage(params, options);
        return text(reply.content.type === "text" ? reply.content.text : JSON.stringify(reply.content));
      }
      case "roots": {
        const listed = await server.listRoots(undefined, options);
        return text(JSON.stringify(listed.roots.map((root) => root.uri)));
      }
      case "caps":
        return text(JSON.stringify(server.getClientCapabilities() || {}));
      default:
        throw new Error(`Unknown tool ${request.params.name}`);
    }
  });
  return server;
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      try {
        resolve(body ? JSON.parse(body) : undefined);
      } catch (error) {
        reject(error);
      }
    });
    req.on("error", reject);
  });
}

function serveStreamableHttp(port) {
  const sessions = new Map();
  http.createServer(async (req, res) => {
    const url = new URL(req.url, "http://127.0.0.1");
    if (url.pathname !== "/mcp") return void res.writeHead(404).end();
    const body = req.method === "POST" ? await readBody(req) : undefined;
    const sessionId = req.headers["mcp-session-id"];
    let transport = sessionId ? sessions.get(sessionId) : undefined;
    if (!transport) {
      if (sessionId || req.method !== "POST" || !types.isInitializeRequest(body)) {
        return void res.writeHead(sessionId ? 404 : 400).end();
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => sessions.set(id, transport),
      });
      transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
      await newServer().connect(transport);
    }
    await transport.handleRequest(req, res, body);
  }).listen(port, "127.0.0.1");
}

function serveSse(port) {
  const connections = new Map();
  http.createServer(async (req, res) => {
    const url = new URL(req.url, "http://127.0.0.1");
    if (url.pathname === "/sse" && req.method === "GET") {
      const transport = new SSEServerTransport("/messages", res);
      connections.set(transport.sessionId, transport);
      res.on("close", () => connections.delete(transport.sessionId));
      await newServer().connect(transport);
      return;
    }
    if (url.pathname === "/messages" && req.method === "POST") {
      const transport = connections.get(url.searchParams.get("sessionId"));
      if (!transport) return void res.writeHead(404).end("Could not find session");
      await transport.handlePostMessage(req, res, await readBody(req));
      return;
    }
    res.writeHead(req.method === "POST" ? 405 : 404).end();
  }).listen(port, "127.0.0.1");
}

function main(argv) {
  const option = (name, fallback) => {
    const index = argv.indexOf(`--${name}`);
    return index >= 0 ? argv[index + 1] : fallback;
  };
  const transport = option("transport", "http");
  const port = Number(option("port", "8931"));
  if (transport === "stdio") return void newServer().connect(new StdioServerTransport());
  if (transport === "sse") return void serveSse(port);
  if (transport === "http") return void serveStreamableHttp(port);
  process.stderr.write(`unknown transport ${transport}\n`);
  process.exit(2);
}

main(process.argv.slice(2));
