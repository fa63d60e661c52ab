#!/usr/bin/env node
// Interop: the official MCP TypeScript SDK v2 client (`@modelcontextprotocol/client`) reading a
// tool call's stream while the server is killed with SIGKILL and restarted.
//
// 1. Connect (the v2 default: the 2025 session handshake), call `start-notification-stream`
//    {interval: 50, count: 30}; the server sends numbered notifications/message `#1`..`#30`.
// 2. After `#10`, print `CUT` on stdout: the harness kills the server (`kill -9`) and starts
//    it again on the same address and data directory. The SDK's own reconnection resumes the
//    stream with `Last-Event-ID`.
// 3. The call must end promptly, well before its own 30 s timeout, either with every
//    notification exactly once and the result, or with a typed JSON-RPC error (the server
//    answers a request its restart lost with `-32603`, carrying the request's id), after
//    the notifications that survived, each exactly once and in order.
//
// Usage: node tests/interop/ts2/client_crash.mjs URL
// Prints `PASS client_crash (ts v2) ...` or `FAIL client_crash (ts v2): reason`; exit 0/1.
import { failer, loadSdk } from './sdk.mjs';

const NAME = 'client_crash (ts v2)';
const COUNT = 30;
const CUT_AFTER = 10;
const fail = failer(NAME);
const { Client, StreamableHTTPClientTransport } = await loadSdk(NAME);
const url = new URL(process.argv[2] ?? '');

const numbers = [];
let cutSent = false;
const client = new Client({ name: 'forkless-interop-ts2', version: '0.0.0' });
client.onerror = () => {}; // the kill surfaces as transport errors before the reconnect
client.setNotificationHandler('notifications/message', (n) => {
  const m = /#(\d+)\s*$/.exec(String(n.params?.data ?? ''));
  if (!m) return;
  numbers.push(Number(m[1]));
  if (Number(m[1]) === CUT_AFTER && !cutSent) {
    cutSent = true;
    console.log('CUT'); // the harness kills and restarts the server now
  }
});
const transport = new StreamableHTTPClientTransport(url, {
  // Enough attempts to outlast a restart; the first comes after a second.
  reconnectionOptions: { initialReconnectionDelay: 1000, maxReconnectionDelay: 2000, reconnectionDelayGrowFactor: 1.5, maxRetries: 10 },
});
await client.connect(transport);
const started = Date.now();
let outcome;
try {
  const result = await client.callTool(
    { name: 'start-notification-stream', arguments: { interval: 50, count: COUNT } },
    { timeout: 30000 },
  );
  outcome = { result };
} catch (error) {
  outcome = { error };
}
const took = Date.now() - started;
await transport.terminateSession().catch(() => {});
await client.close().catch(() => {});

if (!cutSent) fail(`the server was never cut (got ${JSON.stringify(numbers)})`);
const dups = numbers.filter((n, i) => numbers.indexOf(n) !== i);
if (dups.length) fail(`duplicates ${JSON.stringify(dups)} in ${JSON.stringify(numbers)}`);
if (!numbers.every((n, i) => n === i + 1)) fail(`not 1..n in order: ${JSON.stringify(numbers)}`);
if (took >= 25000) fail(`the call took ${took} ms: it waited for its timeout instead of ending`);
if (outcome.result) {
  if (numbers.length !== COUNT) fail(`a result after ${numbers.length} of ${COUNT} notifications`);
  console.log(`PASS ${NAME}: #1..#${COUNT} exactly once and the result, in ${took} ms`);
} else {
  const e = outcome.error;
  const code = e?.code;
  if (code !== -32603) fail(`the call failed untyped (code ${code}): ${e?.message ?? e}`);
  console.log(`PASS ${NAME}: #1..#${numbers.length} exactly once, then the typed error ${code} (${e.message}) for the lost request, in ${took} ms`);
}
process.exit(0);
