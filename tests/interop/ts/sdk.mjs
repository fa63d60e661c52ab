// Loads the official MCP TypeScript SDK (v1) from the project-local npm prefix
// installed by scripts/peers/install.sh (.peers/node), so the interop scripts need
// no package.json of their own. Override with FORKLESS_PEERS_NODE_MODULES=/path/to/node_modules.
import path from 'node:path';
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../../..');
const nodeModules = process.env.FORKLESS_PEERS_NODE_MODULES ?? path.join(root, '.peers/node/node_modules');
const esm = path.join(nodeModules, '@modelcontextprotocol/sdk/dist/esm');
if (!existsSync(esm)) {
  console.error(`FAIL: MCP TypeScript SDK not found at ${esm}; run scripts/peers/install.sh`);
  process.exit(2);
}
const load = (p) => import(pathToFileURL(path.join(esm, p)).href);

export const { Client } = await load('client/index.js');
export const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');
export const { Server } = await load('server/index.js');
export const { StreamableHTTPServerTransport } = await load('server/streamableHttp.js');
export const types = await load('types.js');
// The SDK's example event store (examples/shared/inMemoryEventStore.js), loaded on demand.
export const loadSdkEventStore = async () => (await load('examples/shared/inMemoryEventStore.js')).InMemoryEventStore;
export const sdkVersion = JSON.parse(
  (await import('node:fs')).readFileSync(path.join(nodeModules, '@modelcontextprotocol/sdk/package.json'), 'utf8'),
).version;

// Shared helpers for the interop scripts.
export function parseUrlArg(name) {
  const url = process.argv[2];
  if (!url || !/^https?:\/\//.test(url)) {
    console.error(`usage: node ${name} URL   (e.g. http://127.0.0.1:8080/mcp)`);
    process.exit(2);
  }
  return new URL(url);
}

export class Fail extends Error {}
export function check(cond, msg) {
  if (!cond) throw new Fail(msg);
}

/** Runs main() with a deadline; prints PASS/FAIL and exits 0/1. */
export async function runMain(name, main, timeoutMs = 30000) {
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Fail(`timed out after ${timeoutMs / 1000}s`)), timeoutMs);
  });
  try {
    const summary = await Promise.race([main(), deadline]);
    console.log(`PASS ${name}: ${summary}`);
    process.exit(0);
  } catch (e) {
    if (!(e instanceof Fail)) console.error(e);
    console.log(`FAIL ${name}: ${e instanceof Fail ? e.message : `${e?.name}: ${e?.message}`}`);
    process.exit(1);
  } finally {
    clearTimeout(timer);
  }
}

/** N of a notifications/message whose data text ends in #N, else undefined. */
export function notificationNumber(notification) {
  const data = notification?.params?.data;
  const text = typeof data === 'string' ? data : JSON.stringify(data);
  const m = /#(\d+)(?![\s\S]*#\d)/.exec(text ?? '');
  return m ? Number(m[1]) : undefined;
}
