#!/usr/bin/env node
// Interop: the official MCP TypeScript SDK (v1) client against a Streamable HTTP server.
//
// Steps: initialize; tools/list (must list `long-task`); tools/call `long-task`
// {steps: 5, interval: 10} with an onprogress callback, asserting progress 1..5
// (total 5) arrives in order before the result; if the server lists `echo`, call it;
// then DELETE the session.
//
// Usage: [MCP_BEARER_TOKEN=…] node tests/interop/ts/client_basic.mjs URL
// Prints `PASS client_basic (ts) ...` or `FAIL client_basic (ts): reason`; exit 0/1 (2 = usage).
import { Client, StreamableHTTPClientTransport, check, parseUrlArg, runMain, sdkVersion } from './sdk.mjs';

const NAME = 'client_basic (ts)';
const url = parseUrlArg('client_basic.mjs');

await runMain(NAME, async () => {
  const client = new Client({ name: 'forkless-interop-ts', version: '0.0.0' });
  // With MCP_BEARER_TOKEN set, every request carries it (a server requiring OAuth).
  const token = process.env.MCP_BEARER_TOKEN;
  const options = token ? { requestInit: { headers: { Authorization: `Bearer ${token}` } } } : undefined;
  const transport = new StreamableHTTPClientTransport(url, options);
  await client.connect(transport);
  try {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    check(names.includes('long-task'), `tools/list lacks long-task: ${JSON.stringify(names)}`);

    const progress = [];
    const result = await client.callTool({ name: 'long-task', arguments: { steps: 5, interval: 10 } }, undefined, {
      onprogress: (p) => progress.push(p),
    });
    const texts = (r) => (r.content ?? []).filter((c) => c.type === 'text').map((c) => c.text);
    check(!result.isError, `long-task returned isError: ${JSON.stringify(result.content)}`);
    check((result.content ?? []).length > 0, 'long-task returned no content');
    const values = progress.map((p) => p.progress);
    check(JSON.stringify(values) === '[1,2,3,4,5]', `progress values ${JSON.stringify(values)}, expected [1,2,3,4,5]`);
    check(progress.every((p) => p.total === 5), `progress totals ${JSON.stringify(progress.map((p) => p.total))}, expected 5`);

    let echo = '';
    if (names.includes('echo')) {
      const r = await client.callTool({ name: 'echo', arguments: { text: 'hello forkless' } });
      check(!r.isError && texts(r).some((t) => t.includes('hello forkless')), `echo returned ${JSON.stringify(r.content)}`);
      echo = ', echo ok';
    }
    const sessionId = transport.sessionId;
    return `sdk ${sdkVersion}, protocol ${transport.protocolVersion}, session ${sessionId}, ${names.length} tools, progress ${JSON.stringify(values)}${echo}, result ${JSON.stringify(texts(result))}`;
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close().catch(() => {});
  }
});
