// The official MCP TypeScript SDK v2 client (`@modelcontextprotocol/client`) for the interop
// scripts: loaded from the project-local npm prefix scripts/peers/install.sh fills
// (`.peers/node2`, or `FORKLESS_PEERS_NODE2_MODULES`), and the scripts' one way to fail.
import path from 'node:path';
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..', '..');

/** A function that prints `FAIL <name>: <why>` and exits 1. */
export function failer(name) {
  return (why) => {
    console.log(`FAIL ${name}: ${why}`);
    process.exit(1);
  };
}

/** The SDK's module; a script named `name` fails when it is not installed. */
export async function loadSdk(name) {
  const entry = path.join(
    process.env.FORKLESS_PEERS_NODE2_MODULES ?? path.join(root, '.peers/node2/node_modules'),
    '@modelcontextprotocol/client/dist/index.mjs',
  );
  if (!existsSync(entry)) failer(name)(`the SDK is not at ${entry}; run scripts/peers/install.sh`);
  return import(pathToFileURL(entry).href);
}
