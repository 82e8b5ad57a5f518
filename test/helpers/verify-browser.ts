import { existsSync } from 'node:fs';
import { createServer as createHttpServer, request as httpRequest } from 'node:http';
import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';

/*
 * A real browser for the verification page: Debian's chromium driven by playwright-core, each "device" a fresh
 * context with its own CDP virtual authenticator (a platform authenticator that verifies its user), so passkeys
 * registered on one device are not on another.
 */

/** Debian's chromium, or the one CHROMIUM_PATH names (another distribution's, or Chrome). */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `no browser at ${CHROMIUM}: the verification page's tests drive a real Chromium; install it (Debian: apt-get install -y chromium) or set CHROMIUM_PATH`,
    );
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}

/** One device: a page in its own context, with a virtual authenticator holding its passkeys. */
export interface Device {
  page: Page;
  context: BrowserContext;
  /** The passkeys the authenticator holds now. */
  credentials(): Promise<{ credentialId: string; userHandle?: string }[]>;
}

export async function newDevice(browser: Browser, width = 800): Promise<Device> {
  const context = await browser.newContext({ viewport: { width, height: 800 } });
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: {
      protocol: 'ctap2',
      transport: 'internal',
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  });
  return {
    page,
    context,
    async credentials() {
      const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
      return credentials;
    },
  };
}

/** Opens a passkey registration link on `device` and registers, as a person does: the title the page then shows. */
export async function registerOn(device: Device, url: string): Promise<string> {
  await device.page.goto(url);
  await device.page.click('#register');
  await device.page.waitForSelector('#outcome');
  return (await device.page.textContent('h1')) ?? '';
}

/**
 * PUBLIC_URL must be known before the bot listens on a port of its choosing: a loopback TCP forwarder, started first
 * on port 0, stands where a company's reverse proxy would, and forwards to the bot once it is up.
 */
export interface Forwarder {
  port: number;
  /** Where connections go from now on. */
  target(port: number): void;
  close(): Promise<void>;
}

export async function startForwarder(): Promise<Forwarder> {
  let targetPort: number | undefined;
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    if (targetPort === undefined) return void socket.destroy();
    const up = connect(targetPort, '127.0.0.1');
    sockets.add(up);
    up.on('close', () => sockets.delete(up));
    socket.pipe(up).pipe(socket);
    socket.on('error', () => up.destroy());
    up.on('error', () => socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    target(port) {
      targetPort = port;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * A reverse proxy that serves the bot under a path prefix and strips it before forwarding (as a company's proxy in
 * front of `https://intra.example/cloudops` would): only paths under `prefix` reach the bot; others answer 404.
 */
export async function startStrippingProxy(prefix: string): Promise<Forwarder> {
  let targetPort: number | undefined;
  const server = createHttpServer((req, res) => {
    const url = req.url ?? '/';
    if (targetPort === undefined || !url.startsWith(`${prefix}/`)) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      return void res.end('not under the prefix');
    }
    const upstream = httpRequest(
      {
        host: '127.0.0.1',
        port: targetPort,
        method: req.method,
        path: url.slice(prefix.length),
        headers: req.headers,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    target(port) {
      targetPort = port;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
