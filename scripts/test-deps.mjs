#!/usr/bin/env node
// `npm test`'s pretest: what the suite needs beside node_modules, so that the README's one command (`npm ci && npm
// test`) passes on a fresh machine. The verification page's tests drive Debian's chromium (playwright-core downloads
// no browser), and the tests need a Redis: one answering at REDIS_URL or 127.0.0.1:6379, or redis-server to start.
// What is missing is installed with apt-get when this runs as root on Debian/Ubuntu (as CI does); otherwise the
// script prints the one command to run and stops the test run before it fails half-way.
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';
import { Socket } from 'node:net';
import { delimiter, join } from 'node:path';

/** Whether `command` is an executable on the PATH. */
function onPath(command) {
  return (process.env.PATH ?? '').split(delimiter).some((dir) => {
    try {
      accessSync(join(dir, command), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/**
 * How a Redis at `url` answers PING within half a second: 'pong', 'noauth' (it wants a password, which the suite's
 * global setup does not send: it would start a redis-server of its own instead), or false.
 */
function redisAnswers(url) {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('error', () => done(false));
    socket.connect(Number(port || 6379), hostname.replace(/^\[|\]$/g, '') || '127.0.0.1', () =>
      socket.write('PING\r\n'),
    );
    socket.once('data', (data) => {
      const text = data.toString();
      done(text.startsWith('+PONG') ? 'pong' : text.startsWith('-NOAUTH') ? 'noauth' : false);
    });
  });
}

const missing = [];
// test/helpers/verify-browser.ts: CHROMIUM_PATH, else Debian's /usr/bin/chromium.
const browser = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
if (!existsSync(browser)) {
  if (process.env.CHROMIUM_PATH) {
    process.stderr.write(`npm test: CHROMIUM_PATH=${browser} does not exist\n`);
    process.exit(1);
  }
  missing.push('chromium');
}
// test/helpers/global-setup.ts: REDIS_URL or 127.0.0.1:6379 when it answers, else a redis-server of its own.
const redisUrl = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const redis = onPath('redis-server') ? 'pong' : await redisAnswers(redisUrl);
if (redis !== 'pong') missing.push('redis-server');
const passwordNote =
  redis === 'noauth'
    ? `  (the Redis at ${new URL(redisUrl).host} asks for a password: the tests need one that answers without)\n`
    : '';

if (missing.length > 0) {
  const command = `apt-get update && apt-get install -y ${missing.join(' ')}`;
  const root = process.getuid?.() === 0;
  if (!root || !onPath('apt-get')) {
    process.stderr.write(
      `npm test needs ${missing.join(' and ')}, which this machine lacks. Install ${missing.length > 1 ? 'them' : 'it'}, then run npm test again:\n` +
        `  Debian/Ubuntu: sudo sh -c '${command}'\n` +
        '  elsewhere: a Chromium (set CHROMIUM_PATH to it) and Redis (redis-server on the PATH, or REDIS_URL)\n' +
        passwordNote,
    );
    process.exit(1);
  }
  process.stdout.write(`npm test: installing ${missing.join(' ')} (${command})\n`);
  const install = spawnSync('sh', ['-c', command], {
    stdio: 'inherit',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  if (install.status !== 0) process.exit(install.status ?? 1);
}
