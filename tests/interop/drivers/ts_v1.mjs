#!/usr/bin/env node
// A client driver for `forkless check --client`: the official MCP TypeScript SDK v1
// (`@modelcontextprotocol/sdk`), with its defaults. Connects to URL, calls the tool `numbers`
// {count: 8} once, and prints what it received, one JSON object per line:
// `{"notification": METHOD, "params": ...}`, then `{"result": ...}` or `{"error": "..."}`.
//
// Usage: node tests/interop/drivers/ts_v1.mjs URL
import { Client, StreamableHTTPClientTransport, types } from '../ts/sdk.mjs';

const emit = (obj) => process.stdout.write(`${JSON.stringify(obj)}\n`);
const client = new Client({ name: 'forkless-check-driver', version: '0.0.0' });
client.onerror = () => {};
client.setNotificationHandler(types.LoggingMessageNotificationSchema, (n) =>
  emit({ notification: n.method, params: n.params }),
);
try {
  await client.connect(new StreamableHTTPClientTransport(new URL(process.argv[2])));
  const result = await client.callTool({ name: 'numbers', arguments: { count: 8 } }, undefined, { timeout: 5000 });
  emit({ result });
} catch (e) {
  emit({ error: String(e?.message ?? e) });
}
await client.close().catch(() => {});
process.exit(0);
