#!/usr/bin/env node
// Interop: the official MCP TypeScript SDK v2 client (`@modelcontextprotocol/client`) pinned to
// 2026-07-28 (`versionNegotiation: { mode: { pin } }`), and in auto mode (which must choose
// 2026-07-28 now that the server answers `server/discover`).
//
// In each mode: list tools (must list `long-task`), call `long-task` {steps: 3, interval: 10}
// with onprogress (1..3 of 3, in order, before the result), and call `test_logging_tool` with
// the `_meta` logLevel opt-in (three log messages) and without it (none), and call
// `test_elicitation` with an elicitation handler: the server answers with an
// `InputRequiredResult`, the SDK's multi-round-trip driver runs the handler and retries, and the
// tool reports the handler's answer.
//
// Usage: node tests/interop/ts2/client_2026.mjs URL
// Prints `PASS client_2026 (ts v2) ...` or `FAIL client_2026 (ts v2): reason`; exit 0/1.
import { failer, loadSdk } from './sdk.mjs';

const NAME = 'client_2026 (ts v2)';
const fail = failer(NAME);
const { Client, StreamableHTTPClientTransport } = await loadSdk(NAME);
const url = new URL(process.argv[2] ?? '');

async function run(mode) {
  const logs = [];
  const asked = [];
  const client = new Client(
    { name: 'forkless-interop-ts2-2026', version: '0.0.0' },
    { versionNegotiation: { mode }, capabilities: { elicitation: {} } },
  );
  client.setNotificationHandler('notifications/message', (n) => logs.push(String(n.params?.data ?? '')));
  client.setRequestHandler('elicitation/create', (request) => {
    asked.push(request.params?.message);
    return { action: 'accept', content: { username: 'ada', email: 'ada@example.com' } };
  });
  const transport = new StreamableHTTPClientTransport(url);
  await client.connect(transport);
  try {
    const version = client.getNegotiatedProtocolVersion();
    if (version !== '2026-07-28') fail(`${JSON.stringify(mode)}: negotiated ${version}, expected 2026-07-28`);
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    if (!names.includes('long-task')) fail(`tools/list lacks long-task: ${JSON.stringify(names)}`);
    const progress = [];
    const result = await client.callTool({ name: 'long-task', arguments: { steps: 3, interval: 10 } }, {
      onprogress: (p) => progress.push(p),
    });
    if (result.isError) fail(`long-task returned isError: ${JSON.stringify(result.content)}`);
    const values = progress.map((p) => p.progress);
    if (JSON.stringify(values) !== '[1,2,3]' || !progress.every((p) => p.total === 3)) {
      fail(`progress ${JSON.stringify(progress)}, expected 1..3 of 3`);
    }
    await client.callTool({ name: 'test_logging_tool', arguments: {} });
    if (logs.length !== 0) fail(`logs without an opt-in: ${JSON.stringify(logs)}`);
    await client.callTool({
      name: 'test_logging_tool',
      arguments: {},
      _meta: { 'io.modelcontextprotocol/logLevel': 'info' },
    });
    if (logs.length !== 3) fail(`with the logLevel opt-in, ${logs.length} log messages: ${JSON.stringify(logs)}`);
    const elicited = await client.callTool({ name: 'test_elicitation', arguments: { message: 'Who are you?' } });
    const text = (elicited.content ?? []).map((c) => c.text ?? '').join(' ');
    if (elicited.isError || JSON.stringify(asked) !== '["Who are you?"]' || !text.includes('action=accept') || !text.includes('ada@example.com')) {
      fail(`elicitation round trip: asked ${JSON.stringify(asked)}, answered ${JSON.stringify(text)}`);
    }
    return `${JSON.stringify(mode)}: ${version}, ${names.length} tools, progress ${JSON.stringify(values)}, logs ${logs.length}, elicited once`;
  } finally {
    await client.close().catch(() => {});
  }
}

try {
  const out = [await run({ pin: '2026-07-28' }), await run('auto')];
  console.log(`PASS ${NAME}: ${out.join('; ')}`);
} catch (e) {
  fail(`${e?.name ?? 'Error'}: ${e?.message ?? e}`);
}
