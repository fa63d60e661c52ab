#!/usr/bin/env node
// Interop: the official MCP TypeScript SDK v2 client (`@modelcontextprotocol/client`) in auto
// mode against `forkless gateway` fronting `@modelcontextprotocol/server-everything` (over
// stdio, or over Streamable HTTP with `--upstream`), a server neither side wrote.
//
// A gateway serves the session revisions only, so the client falls back to `initialize`.
// Then: list tools; `echo`; `trigger-long-running-operation` {duration: 1, steps: 5} with
// onprogress (1..5 in order before the result); `trigger-sampling-request`, answered by this
// client's sampling handler; `toggle-simulated-logging`, then one log message (on the
// standalone stream).
//
// Usage: node tests/interop/gateway/everything_v2.mjs URL
// Prints `PASS everything (ts v2) ...` or `FAIL everything (ts v2): reason`; exit 0/1.
import { failer, loadSdk } from '../ts2/sdk.mjs';

const NAME = 'everything (ts v2)';
const SAMPLED = 'an answer from the forkless test client';
const fail = failer(NAME);
const { Client, StreamableHTTPClientTransport } = await loadSdk(NAME);
const url = new URL(process.argv[2] ?? '');
const texts = (result) => (result.content ?? []).map((c) => c.text ?? '');
const timer = setTimeout(() => fail('timed out after 60 s'), 60_000);

const logs = [];
let gotLog;
const logged = new Promise((resolve) => { gotLog = resolve; });
const client = new Client(
  { name: 'forkless-interop-ts2-everything', version: '0.0.0' },
  { versionNegotiation: { mode: 'auto' }, capabilities: { sampling: {} } },
);
client.setNotificationHandler('notifications/message', (n) => {
  logs.push(n.params?.level);
  gotLog();
});
client.setRequestHandler('sampling/createMessage', () => ({
  role: 'assistant',
  content: { type: 'text', text: SAMPLED },
  model: 'forkless-test',
}));
try {
  await client.connect(new StreamableHTTPClientTransport(url));
  const version = client.getNegotiatedProtocolVersion();
  if (version === '2026-07-28') fail('negotiated 2026-07-28 through a gateway that serves the session revisions only');
  const names = (await client.listTools()).tools.map((t) => t.name);
  for (const want of ['echo', 'trigger-long-running-operation', 'trigger-sampling-request']) {
    if (!names.includes(want)) fail(`tools/list lacks ${want}: ${JSON.stringify(names)}`);
  }
  const echoed = await client.callTool({ name: 'echo', arguments: { message: 'hello forkless' } });
  if (echoed.isError || !texts(echoed).some((t) => t.includes('hello forkless'))) fail(`echo returned ${JSON.stringify(echoed)}`);
  const progress = [];
  const long = await client.callTool(
    { name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 5 } },
    { onprogress: (p) => progress.push(p.progress) },
  );
  if (long.isError || JSON.stringify(progress) !== '[1,2,3,4,5]') fail(`long-running operation: progress ${JSON.stringify(progress)}`);
  const sampled = await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'hi', maxTokens: 5 } });
  if (sampled.isError || !texts(sampled).some((t) => t.includes(SAMPLED))) fail(`sampling result ${JSON.stringify(sampled.content)}`);
  await client.callTool({ name: 'toggle-simulated-logging', arguments: {} });
  await logged;
  await client.callTool({ name: 'toggle-simulated-logging', arguments: {} });
  console.log(`PASS ${NAME}: protocol ${version}, ${names.length} tools, progress ${JSON.stringify(progress)}, sampling answered, log '${logs[0]}' received`);
} catch (e) {
  fail(`${e?.name ?? 'Error'}: ${e?.message ?? e}`);
} finally {
  clearTimeout(timer);
  await client.close().catch(() => {});
}
process.exit(0);
