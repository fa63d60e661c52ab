#!/usr/bin/env node
// Interop: resume a cut POST SSE stream with the official MCP TypeScript SDK v2 client's own
// resumption-token API (`client.request(..., { resumptionToken, onresumptiontoken })`), as
// `tests/interop/ts/client_resume.mjs` does with v1.
//
// 1. Connect (auto mode: a server offering only the session revisions is spoken to in one),
//    call `start-notification-stream` {interval: 20, count: 30} with `onresumptiontoken`.
// 2. At `#10`, cut: `transport.close()` aborts every connection without DELETE.
// 3. A new transport with the `sessionId` and the negotiated version; the same request sent
//    again with `resumptionToken` = the last token (the SDK sends GET + `Last-Event-ID`).
// 4. PASS when #1..#30 arrived each exactly once, in order, and the result.
//
// Usage: node tests/interop/ts2/client_resume.mjs URL
// Prints `PASS client_resume (ts v2) ...` or `FAIL client_resume (ts v2): reason`; exit 0/1.
import { failer, loadSdk } from './sdk.mjs';

const NAME = 'client_resume (ts v2)';
const COUNT = 30;
const CUT_AFTER = 10;
const fail = failer(NAME);
const { Client, StreamableHTTPClientTransport } = await loadSdk(NAME);
const url = new URL(process.argv[2] ?? '');
const timer = setTimeout(() => fail('timed out after 60 s'), 60_000);
const call = { method: 'tools/call', params: { name: 'start-notification-stream', arguments: { interval: 20, count: COUNT } } };
const number = (n) => {
  const m = /#(\d+)$/.exec(String(n.params?.data ?? ''));
  return m ? Number(m[1]) : undefined;
};

async function phase1() {
  const before = [];
  const tokens = [];
  let cut = false;
  let cutToken;
  let finished = false;
  let onCut;
  const cutDone = new Promise((resolve) => { onCut = resolve; });
  const client = new Client({ name: 'forkless-interop-ts2', version: '0.0.0' }, { versionNegotiation: { mode: 'auto' } });
  const transport = new StreamableHTTPClientTransport(url);
  client.onerror = () => {}; // the cut surfaces as transport errors: expected
  client.setNotificationHandler('notifications/message', (n) => {
    const num = number(n);
    if (cut || num === undefined) return;
    before.push(num);
    if (num === CUT_AFTER) {
      cut = true;
      cutToken = tokens.at(-1);
      transport.close().finally(onCut);
    }
  });
  await client.connect(transport);
  const { sessionId, protocolVersion } = transport;
  if (!sessionId) fail(`no Mcp-Session-Id (negotiated ${client.getNegotiatedProtocolVersion()})`);
  const pending = client
    .request(call, { timeout: 30000, onresumptiontoken: (t) => { if (!cut) tokens.push(t); } })
    .then(() => { finished = true; onCut(); }, () => {});
  await cutDone;
  await pending;
  await client.close().catch(() => {});
  return { before, cutToken, finished, sessionId, protocolVersion };
}

async function phase2(sessionId, protocolVersion, token) {
  const after = [];
  const client = new Client({ name: 'forkless-interop-ts2', version: '0.0.0' }, { versionNegotiation: { mode: 'legacy' } });
  const transport = new StreamableHTTPClientTransport(url, { sessionId });
  client.onerror = () => {};
  client.setNotificationHandler('notifications/message', (n) => {
    const num = number(n);
    if (num !== undefined) after.push(num);
  });
  await client.connect(transport); // sessionId set: no initialize
  transport.setProtocolVersion(protocolVersion);
  try {
    const result = await client.request(call, { timeout: 20000, resumptionToken: token, onresumptiontoken: () => {} });
    return { after, result };
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close().catch(() => {});
  }
}

try {
  const p1 = await phase1();
  if (p1.finished) fail(`the call finished before #${CUT_AFTER} (got ${JSON.stringify(p1.before)})`);
  if (!p1.cutToken) fail(`no resumption token by #${CUT_AFTER}`);
  const p2 = await phase2(p1.sessionId, p1.protocolVersion, p1.cutToken);
  const got = [...p1.before, ...p2.after];
  const ctx = `before the cut ${JSON.stringify(p1.before)}, after the resume ${JSON.stringify(p2.after)}`;
  if (!got.every((n, i) => n === i + 1) || got.length !== COUNT) fail(`not #1..#${COUNT} exactly once in order: ${ctx}`);
  if (p2.result.isError) fail(`the result is an error: ${JSON.stringify(p2.result.content)}`);
  console.log(`PASS ${NAME}: protocol ${p1.protocolVersion}, #1..#${COUNT} exactly once in order, ${p1.before.length} before the cut (resumed from ${JSON.stringify(p1.cutToken)}), ${p2.after.length} after`);
} catch (e) {
  fail(`${e?.name ?? 'Error'}: ${e?.message ?? e}`);
} finally {
  clearTimeout(timer);
}
process.exit(0);
