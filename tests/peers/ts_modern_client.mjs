// The TypeScript SDK 2.x modern client (@modelcontextprotocol/client, pinned in the Makefile,
// installed by `make npm-servers` into .tools/npm-servers/client@<version>/): the same steps as
// tests/peers/legacy_probe_client.py, through the bridge, in revision 2026-07-28.
//
//   node ts_modern_client.mjs CLIENT_DIR URL [--roots] [--elicitation] [--sampling]
//        [--subscribe URI] [--call TOOL] [--wait SECONDS]
//
// Declares the capabilities asked for (answering roots/list with file:///test/root, declining
// elicitation in form and URL mode, answering sampling with "ok"), lists the tools, optionally
// listens on a resource, calls a tool and waits for that resource's first update, and lists the
// tools again. Prints one JSON line: {"tools": [sorted names], "after": [sorted names],
// "updated": [URIs]}. Authorization: Bearer $MRTR_PRINCIPAL if set.
import path from "node:path";
import { pathToFileURL } from "node:url";

const [clientDir, url, ...rest] = process.argv.slice(2);
const flag = (name) => rest.includes(name);
const option = (name) => {
  const index = rest.indexOf(name);
  return index >= 0 ? rest[index + 1] : undefined;
};
const entry = path.join(clientDir, "node_modules/@modelcontextprotocol/client/dist/index.mjs");
const { Client, StreamableHTTPClientTransport } = await import(pathToFileURL(entry).href);

const capabilities = {};
if (flag("--roots")) capabilities.roots = {};
if (flag("--elicitation")) capabilities.elicitation = { form: {}, url: {} }; // as mcp 1.x declares it
if (flag("--sampling")) capabilities.sampling = {};
const client = new Client(
  { name: "ts-modern-client", version: "1.0.0" },
  { capabilities, versionNegotiation: { mode: { pin: "2026-07-28" } } },
);
if (capabilities.roots) {
  client.setRequestHandler("roots/list", async () => ({ roots: [{ uri: "file:///test/root" }] }));
}
if (capabilities.elicitation) {
  client.setRequestHandler("elicitation/create", async () => ({ action: "decline" }));
}
if (capabilities.sampling) {
  client.setRequestHandler("sampling/createMessage", async () => ({
    role: "assistant",
    content: { type: "text", text: "ok" },
    model: "m",
  }));
}
const updated = [];
client.setNotificationHandler("notifications/resources/updated", async (notification) => {
  updated.push(notification.params.uri);
});
const headers = process.env.MRTR_PRINCIPAL
  ? { Authorization: `Bearer ${process.env.MRTR_PRINCIPAL}` }
  : {};
await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
const tools = (await client.listTools()).tools.map((tool) => tool.name).sort();
const uri = option("--subscribe");
if (uri) {
  const subscription = await client.listen({ resourceSubscriptions: [uri] });
  const call = option("--call");
  if (call) await client.callTool({ name: call, arguments: {} });
  const deadline = Date.now() + 1000 * Number(option("--wait") ?? 15);
  while (updated.length === 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await subscription.close();
}
const after = (await client.listTools()).tools.map((tool) => tool.name).sort();
console.log(JSON.stringify({ tools, after, updated }));
await client.close();
process.exit(0);
