// An MCP client of another implementation: the TypeScript SDK (@modelcontextprotocol/sdk),
// installed by .ci/run into .ci/node. Used by tests/test_mcp_typescript.py.
//
//   node mcp_client.cjs stdio <python> <db>   spawn `python -m mcp_server --db <db>`
//   node mcp_client.cjs http <url>            streamable HTTP
//
// Lists the tools, calls remember and reconstruct, and checks each structured result
// against the tool's output schema (Ajv, besides the SDK's own check). Prints one JSON
// line: {"transport", "tools", "remember", "reconstruct", "validated"}; exits 1 on any error.
"use strict";
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const Ajv = require("ajv");

function transportFor(argv) {
  const [kind, ...rest] = argv;
  if (kind === "stdio") {
    const [python, db] = rest;
    return new StdioClientTransport({
      command: python,
      args: ["-m", "mcp_server", "--db", db],
      env: process.env,
      stderr: "inherit",
    });
  }
  if (kind === "http") return new StreamableHTTPClientTransport(new URL(rest[0]));
  throw new Error(`unknown transport ${kind}`);
}

async function main() {
  const kind = process.argv[2];
  const client = new Client({ name: "localmem-ts-test", version: "1.0.0" });
  await client.connect(transportFor(process.argv.slice(2)));
  const { tools } = await client.listTools();
  const schemas = Object.fromEntries(tools.map((t) => [t.name, t.outputSchema]));
  const ajv = new Ajv({ strict: false, allErrors: true });
  const validated = [];

  async function call(name, args) {
    const res = await client.callTool({ name, arguments: args });
    if (res.isError) throw new Error(`${name} failed: ${JSON.stringify(res.content)}`);
    if (!schemas[name]) throw new Error(`${name} has no output schema`);
    if (res.structuredContent === undefined) throw new Error(`${name} returned no structured content`);
    const check = ajv.compile(schemas[name]);
    if (!check(res.structuredContent)) {
      throw new Error(`${name}: result does not match its output schema: ${ajv.errorsText(check.errors)}`);
    }
    validated.push(name);
    return res.structuredContent;
  }

  const remember = await call("remember", {
    session: "ts-client",
    turns: [
      { text: "I repotted the lemon tree into a terracotta pot.", speaker: "Ana", timestamp: "2024-05-01T10:00" },
      { text: "The lemon tree now stands by the south window.", speaker: "Ana", timestamp: "2024-05-02T09:00" },
    ],
  });
  const reconstruct = await call("reconstruct", { query: "Where does the lemon tree stand?" });
  await client.close();
  console.log(JSON.stringify({ transport: kind, tools: tools.map((t) => t.name), remember, reconstruct, validated }));
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err));
  process.exit(1);
});
