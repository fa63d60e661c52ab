#!/usr/bin/env node
// Interop: resume a POST SSE stream with the official MCP TypeScript SDK (v1)
// client's own resumption-token API (`client.request(..., {resumptionToken, onresumptiontoken})`).
//
// 1. Connect, initialize, request tools/call `start-notification-stream`
//    {interval: 20, count: 30} with `onresumptiontoken`; the server sends 30
//    notifications/message whose text ends in `#1` .. `#30`, then the result.
// 2. When `#10` arrives, cut: `transport.close()` aborts every fetch (POST and GET
//    connections) without DELETE, so the session stays alive. Later events and token
//    updates are ignored (lost with the connection).
// 3. New transport with `sessionId` (connect() then skips initialize) and the
//    negotiated protocol version; re-send the request with `resumptionToken` = the
//    last token: the SDK sends GET + `Last-Event-ID` and maps the replayed response
//    to the new request id.
// 4. Assert #1..#30 each received exactly once, in order, across both connections,
//    and the final result (not isError). DELETE the session.
//
// Token timing in this SDK: `onresumptiontoken(id)` is called synchronously *before*
// the event's message is dispatched, and notification handlers run in a microtask,
// so when the handler sees #10 the last token is exactly #10's event id.
//
// With `--tool NAME --args JSON --progress`, the call is another tool that numbers its
// events 1..30 by progress notifications (a stdio server's, behind a gateway): the request
// carries `_meta.progressToken` itself, and the numbers are the notifications' `progress`
// values for that token (counted by this script's own handler, since a replayed progress
// notification names the first request's token, not the re-sent one's).
//
// Usage: node tests/interop/ts/client_resume.mjs URL [--cut-after N] [--tool NAME --args JSON [--progress]]
// Prints `PASS client_resume (ts) ...` or `FAIL client_resume (ts): reason`; exit 0/1 (2 = usage).
import {
  Client,
  StreamableHTTPClientTransport,
  check,
  notificationNumber,
  parseUrlArg,
  runMain,
  types,
} from './sdk.mjs';

const NAME = 'client_resume (ts)';
const COUNT = 30;
const INTERVAL_MS = 20;
const url = parseUrlArg('client_resume.mjs');
const cutIdx = process.argv.indexOf('--cut-after');
const CUT_AFTER = cutIdx > 0 ? Number(process.argv[cutIdx + 1]) : 10;
if (!(CUT_AFTER >= 1 && CUT_AFTER < COUNT)) {
  console.error(`--cut-after must be in 1..${COUNT - 1}`);
  process.exit(2);
}
const { CallToolResultSchema, LoggingMessageNotificationSchema, ProgressNotificationSchema } = types;
const flag = (name) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const PROGRESS = process.argv.includes('--progress');
const TOKEN = 'client-resume-ts';
const callParams = flag('--tool')
  ? { name: flag('--tool'), arguments: JSON.parse(flag('--args') ?? '{}') }
  : { name: 'start-notification-stream', arguments: { interval: INTERVAL_MS, count: COUNT } };
if (PROGRESS) callParams._meta = { progressToken: TOKEN };

/** Call `onNumber(n)` for each numbered event the client receives. */
function onNumbered(client, onNumber) {
  if (PROGRESS) {
    client.setNotificationHandler(ProgressNotificationSchema, (n) => {
      if (n.params.progressToken === TOKEN) onNumber(n.params.progress);
    });
  } else {
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      const num = notificationNumber(n);
      if (num !== undefined) onNumber(num);
    });
  }
}

async function phase1() {
  const before = [];
  const tokens = [];
  let cut = false;
  let cutToken;
  let finished = false;
  let onCut;
  const cutDone = new Promise((resolve) => (onCut = resolve));

  const client = new Client({ name: 'forkless-interop-ts', version: '0.0.0' });
  const transport = new StreamableHTTPClientTransport(url);
  client.onerror = () => {}; // the abort below surfaces as transport errors; expected
  onNumbered(client, (num) => {
    if (cut) return;
    before.push(num);
    if (num === CUT_AFTER) {
      cut = true;
      cutToken = tokens.at(-1);
      transport.close().finally(onCut); // aborts the POST SSE response mid-stream
    }
  });
  await client.connect(transport);
  const sessionId = transport.sessionId;
  const protocolVersion = transport.protocolVersion;
  check(sessionId, 'server did not assign an Mcp-Session-Id');

  const call = client
    .request({ method: 'tools/call', params: callParams }, CallToolResultSchema, {
      timeout: 30000,
      onresumptiontoken: (token) => {
        if (!cut) tokens.push(token);
      },
    })
    .then(
      () => {
        finished = true;
        onCut();
      },
      () => {}, // rejected with "Connection closed" by the cut: expected
    );
  await cutDone;
  await call;
  await client.close().catch(() => {});
  return { before, tokens, cutToken, finished, sessionId, protocolVersion };
}

async function phase2(sessionId, protocolVersion, token) {
  const after = [];
  const tokens = [];
  const client = new Client({ name: 'forkless-interop-ts', version: '0.0.0' });
  const transport = new StreamableHTTPClientTransport(url, { sessionId });
  const errors = [];
  client.onerror = (e) => errors.push(e);
  onNumbered(client, (num) => after.push(num));
  await client.connect(transport); // sessionId set: no initialize
  transport.setProtocolVersion(protocolVersion);
  try {
    const result = await client
      .request({ method: 'tools/call', params: callParams }, CallToolResultSchema, {
        timeout: 20000,
        resumptionToken: token,
        onresumptiontoken: (t) => tokens.push(t),
      })
      .catch((e) => {
        throw new Error(`resumed request failed: ${e.message}${errors.length ? ` (transport: ${errors.map((x) => x.message).join('; ')})` : ''}`);
      });
    return { after, tokens, result };
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close().catch(() => {});
  }
}

await runMain(NAME, async () => {
  const p1 = await phase1();
  check(!p1.finished, `the call finished before #${CUT_AFTER} was seen (received ${JSON.stringify(p1.before)})`);
  check(p1.cutToken, `no resumption token reported by #${CUT_AFTER}`);
  const p2 = await phase2(p1.sessionId, p1.protocolVersion, p1.cutToken);
  const got = [...p1.before, ...p2.after];
  const dups = [...new Set(got.filter((n, i) => got.indexOf(n) !== i))];
  const missing = Array.from({ length: COUNT }, (_, i) => i + 1).filter((n) => !got.includes(n));
  const ctx = `before cut ${JSON.stringify(p1.before)}, after resume ${JSON.stringify(p2.after)}`;
  check(dups.length === 0, `duplicates ${JSON.stringify(dups)}; ${ctx}`);
  check(missing.length === 0, `missing ${JSON.stringify(missing)}; ${ctx}`);
  check(got.every((n, i) => n === i + 1), `out of order: ${JSON.stringify(got)}`);
  check(!p2.result.isError, `final result isError: ${JSON.stringify(p2.result.content)}`);
  check((p2.result.content ?? []).length > 0, 'final result has no content');
  const texts = p2.result.content.filter((c) => c.type === 'text').map((c) => c.text);
  return `#1..#${COUNT} exactly once in order; ${p1.before.length} before the cut (resumed from Last-Event-ID ${JSON.stringify(p1.cutToken)}), ${p2.after.length} after; result ${JSON.stringify(texts)}`;
});
