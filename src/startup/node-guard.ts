/**
 * Imported first by src/main.ts, so it runs before any other module of the bot: on a Node.js older than the one
 * the bot needs, one line and exit 1 (docs/troubleshooting.md#node-version), instead of a TypeError from deep inside
 * undici. It imports nothing. bin/cloudops.mjs makes the same check for the CLI.
 */

/** The Node.js major version the bot needs (package.json `engines`). */
export const REQUIRED_NODE_MAJOR = 24;

const found = process.versions.node;
if (Number(found.split('.')[0]) < REQUIRED_NODE_MAJOR) {
  // Synchronous on a terminal, a file or a pipe (Linux), so the line is out before the exit.
  process.stderr.write(
    `cloudops: Node.js ${found} is too old: cloudops needs Node.js ${REQUIRED_NODE_MAJOR} or later (nodejs.org, or nvm install ${REQUIRED_NODE_MAJOR})\n`,
  );
  process.exit(1);
}
