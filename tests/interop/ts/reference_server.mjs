#!/usr/bin/env node
// Reference MCP server on the official TypeScript SDK (v1): low-level `Server` +
// `StreamableHTTPServerTransport` (stateful sessions) + an in-memory event store, for
// validating the interop clients while the forkless server is being written.
// Tools: `echo {text}`, `start-notification-stream {interval, count}` (notifications
// on the request's own SSE stream, data "Periodic notification #N"),
// `start-background-stream {interval, count}` (on the standalone GET stream, for
// `forkless check`), `long-task {steps, interval}` (progress 1..steps, total = steps).
//
// Usage: node tests/interop/ts/reference_server.mjs [--port 0] [--json-response] [--sdk-event-store]
// Prints `READY http://127.0.0.1:<port>/mcp` once listening.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { Server, StreamableHTTPServerTransport, types, loadSdkEventStore } from './sdk.mjs';

const { CallToolRequestSchema, ListToolsRequestSchema, SetLevelRequestSchema, isInitializeRequest } = types;
const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : dflt;
};
const port = Number(opt('--port', '0'));
const jsonResponse = argv.includes('--json-response');
// --sdk-event-store: the SDK's own example InMemoryEventStore instead of the counter store below.
const sdkEventStore = argv.includes('--sdk-event-store');

// Event ids are a global counter, so replay order is append order (the SDK's example
// InMemoryEventStore orders by `${streamId}_${Date.now()}_${random}`, which can reorder
// events stored within the same millisecond).
class EventStore {
  constructor() {
    this.events = []; // {id, streamId, message}
    this.index = new Map();
  }
  async storeEvent(streamId, message) {
    const id = String(this.events.length + 1);
    this.index.set(id, this.events.length);
    this.events.push({ id, streamId, message });
    return id;
  }
  async getStreamIdForEventId(eventId) {
    const i = this.index.get(eventId);
    return i === undefined ? undefined : this.events[i].streamId;
  }
  async replayEventsAfter(lastEventId, { send }) {
    const i = this.index.get(lastEventId);
    if (i === undefined) throw new Error(`unknown Last-Event-ID ${lastEventId}`);
    const streamId = this.events[i].streamId;
    for (const e of this.events.slice(i + 1)) {
      if (e.streamId === streamId && e.message && Object.keys(e.message).length > 0) await send(e.id, e.message);
    }
    return streamId;
  }
}

const TOOLS = [
  {
    name: 'echo',
    description: 'Echoes the given text back as one text content item',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
  },
  {
    name: 'start-notification-stream',
    description: 'Sends `count` notifications/message `interval` ms apart on the request stream, then returns',
    inputSchema: {
      type: 'object',
      properties: { interval: { type: 'number' }, count: { type: 'integer' } },
      required: ['interval', 'count'],
    },
  },
  {
    name: 'start-background-stream',
    description: 'Answers at once, then sends `count` notifications/message `interval` ms apart on the standalone (GET) stream',
    inputSchema: {
      type: 'object',
      properties: { interval: { type: 'number' }, count: { type: 'integer' } },
      required: ['interval', 'count'],
    },
  },
  {
    name: 'long-task',
    description: 'Reports progress 1..steps (total = steps) `interval` ms apart, then returns',
    inputSchema: {
      type: 'object',
      properties: { steps: { type: 'integer' }, interval: { type: 'number' } },
      required: ['steps', 'interval'],
    },
  },
];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function buildServer() {
  const server = new Server({ name: 'forkless-ts-reference-server', version: '0.0.0' }, { capabilities: { tools: {}, logging: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler(SetLevelRequestSchema, async () => ({}));
  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const { name, arguments: args = {} } = req.params;
    const text = (t) => ({ content: [{ type: 'text', text: t }] });
    if (name === 'echo') return text(String(args.text));
    if (name === 'start-notification-stream') {
      const count = Number(args.count);
      for (let n = 1; n <= count; n++) {
        await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data: `Periodic notification #${n}` } });
        if (n < count) await sleep(Number(args.interval));
      }
      return text(`Sent ${count} notifications`);
    }
    if (name === 'start-background-stream') {
      const count = Number(args.count);
      // Not awaited, and without a related request: the SDK sends these on the standalone GET stream.
      (async () => {
        for (let n = 1; n <= count; n++) {
          await server.notification({ method: 'notifications/message', params: { level: 'info', data: `Background notification #${n}` } });
          if (n < count) await sleep(Number(args.interval));
        }
      })().catch((e) => console.error('background stream stopped:', e.message));
      return text(`Sending ${count} notifications on the standalone stream`);
    }
    if (name === 'long-task') {
      const steps = Number(args.steps);
      const token = req.params._meta?.progressToken;
      for (let i = 1; i <= steps; i++) {
        await sleep(Number(args.interval));
        if (token !== undefined) {
          await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: i, total: steps } });
        }
      }
      return text(`Completed ${steps} steps`);
    }
    return { isError: true, content: [{ type: 'text', text: `Unknown tool: ${name}` }] };
  });
  return server;
}

const transports = new Map();
const eventStore = sdkEventStore ? new (await loadSdkEventStore())() : new EventStore();
const readBody = (req) =>
  new Promise((resolve, reject) => {
    let s = '';
    req.on('data', (c) => (s += c));
    req.on('end', () => resolve(s));
    req.on('error', reject);
  });

const httpServer = http.createServer(async (req, res) => {
  try {
    if (new URL(req.url, 'http://x').pathname !== '/mcp') {
      res.writeHead(404).end('not found');
      return;
    }
    const sid = req.headers['mcp-session-id'];
    let body;
    if (req.method === 'POST') {
      const raw = await readBody(req);
      try {
        body = JSON.parse(raw);
      } catch {
        res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32700, message: 'Parse error' }, id: null }));
        return;
      }
    }
    let transport = sid ? transports.get(sid) : undefined;
    if (!transport) {
      if (sid) {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
        return;
      }
      if (req.method !== 'POST' || !isInitializeRequest(body)) {
        res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: no valid session ID' }, id: null }));
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore,
        retryInterval: 500,
        enableJsonResponse: jsonResponse,
        enableDnsRebindingProtection: true,
        allowedHosts: ['127.0.0.1', 'localhost', '[::1]', `127.0.0.1:${httpServer.address().port}`, `localhost:${httpServer.address().port}`, `[::1]:${httpServer.address().port}`],
        onsessioninitialized: (id) => transports.set(id, transport),
      });
      transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
      await buildServer().connect(transport);
    }
    await transport.handleRequest(req, res, body);
  } catch (e) {
    console.error(e);
    if (!res.headersSent) res.writeHead(500).end('internal error');
  }
});
httpServer.listen(port, '127.0.0.1', () => {
  console.log(`READY http://127.0.0.1:${httpServer.address().port}/mcp`);
});
