#!/usr/bin/env node
// Interop: the official MCP TypeScript SDK (v1) client against `forkless gateway` fronting
// `@modelcontextprotocol/server-everything` (stdio).
//
// Steps: initialize; tools/list; `echo`; `trigger-long-running-operation` {duration: 1,
// steps: 5} with onprogress, asserting progress 1..5 in order before the result;
// `trigger-sampling-request`, answered by this client's sampling handler, asserting the
// child saw the answer; then DELETE the session.
//
// Usage: node tests/interop/gateway/everything.mjs URL
// Prints `PASS everything (ts) ...` or `FAIL everything (ts): reason`; exit 0/1 (2 = usage).
import { Client, StreamableHTTPClientTransport, check, parseUrlArg, runMain, sdkVersion, types } from '../ts/sdk.mjs';

const NAME = 'everything (ts)';
const SAMPLED = 'an answer from the forkless test client';
const url = parseUrlArg('everything.mjs');

await runMain(
  NAME,
  async () => {
    const client = new Client({ name: 'forkless-interop-ts', version: '0.0.0' }, { capabilities: { sampling: {} } });
    client.setRequestHandler(types.CreateMessageRequestSchema, async () => ({
      role: 'assistant',
      content: { type: 'text', text: SAMPLED },
      model: 'forkless-test',
    }));
    const transport = new StreamableHTTPClientTransport(url);
    await client.connect(transport);
    try {
      const texts = (r) => (r.content ?? []).filter((c) => c.type === 'text').map((c) => c.text);
      const { tools } = await client.listTools();
      const names = tools.map((t) => t.name);
      for (const want of ['echo', 'trigger-long-running-operation', 'trigger-sampling-request']) {
        check(names.includes(want), `tools/list lacks ${want}: ${JSON.stringify(names)}`);
      }
      const echo = await client.callTool({ name: 'echo', arguments: { message: 'hello forkless' } });
      check(texts(echo).some((t) => t.includes('hello forkless')), `echo returned ${JSON.stringify(echo.content)}`);

      const progress = [];
      const long = await client.callTool(
        { name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 5 } },
        undefined,
        { onprogress: (p) => progress.push(p.progress) },
      );
      check(!long.isError, `long-running operation returned isError: ${JSON.stringify(long.content)}`);
      check(JSON.stringify(progress) === '[1,2,3,4,5]', `progress ${JSON.stringify(progress)}, expected [1,2,3,4,5]`);

      const sampled = await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'hi', maxTokens: 5 } });
      check(texts(sampled).some((t) => t.includes(SAMPLED)), `sampling result ${JSON.stringify(sampled.content)}`);
      return `sdk ${sdkVersion}, protocol ${transport.protocolVersion}, session ${transport.sessionId}, ${names.length} tools, progress ${JSON.stringify(progress)}, sampling answered`;
    } finally {
      await transport.terminateSession().catch(() => {});
      await client.close().catch(() => {});
    }
  },
  40000,
);
