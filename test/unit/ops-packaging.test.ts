import { execFile, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Redis, type RedisOptions } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { freePort } from '../../sim/local-redis.ts';
import { startHealthServer } from '../../src/observability/http.ts';

// Docker does not run here: these check what can be checked without it, and run the health checks for real.
const repo = fileURLToPath(new URL('../../', import.meta.url));
const read = (file: string) => readFileSync(join(repo, file), 'utf8');
const run = promisify(execFile);

interface Service {
  image?: string;
  build?: string;
  command?: string[];
  profiles?: string[];
  ports?: string[];
  container_name?: string;
  env_file?: { path: string; required?: boolean }[];
  environment?: Record<string, string>;
  volumes?: (string | { type: string; source: string; target: string })[];
  healthcheck?: { test: string[] };
}
const compose = parse(read('docker-compose.yml'), { merge: true }) as {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
};
const pkg = JSON.parse(read('package.json')) as {
  engines: { node: string };
  scripts: Record<string, string>;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  allowScripts?: Record<string, boolean>;
};
const major = (range: string) => Number(/(\d+)/.exec(range)?.[1]);

/** Dockerfile instructions, with `\` continuations joined, split into stages at each FROM. */
function dockerStages(): { from: string; lines: string[] }[] {
  const lines = read('Dockerfile')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  const stages: { from: string; lines: string[] }[] = [];
  for (const line of lines) {
    if (/^FROM\s/i.test(line)) stages.push({ from: line, lines: [] });
    else stages.at(-1)?.lines.push(line);
  }
  return stages;
}
const stages = dockerStages();
const runtime = stages.at(-1)!;
const instruction = (name: string) =>
  runtime.lines
    .filter((line) => line.toUpperCase().startsWith(`${name} `))
    .map((line) => line.slice(name.length + 1).trim());
/** The JSON (exec) form of an instruction's argument, e.g. CMD ["node", ...]. */
const execForm = (text: string): string[] => JSON.parse(text.replace(/^CMD\s+/i, '')) as string[];

describe('Dockerfile', () => {
  it('installs all dependencies and compiles, then installs production dependencies only for the image', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(stages[0]!.lines.some((line) => /^RUN npm ci\b(?!.*--omit=dev)/.test(line))).toBe(true);
    expect(stages[0]!.lines).toContain('RUN npm run build');
    expect(runtime.lines.some((line) => /^RUN npm ci\b.*--omit=dev/.test(line))).toBe(true);
    expect(runtime.lines).toContain('COPY --from=build /app/dist ./dist');
    // Compiled at build time: neither the compiler nor tsx is a production dependency.
    for (const tool of ['tsx', 'typescript']) expect(pkg.dependencies[tool], tool).toBeUndefined();
  });

  it('ships the cloudops CLI on the PATH, running dist/', () => {
    expect(runtime.lines).toContain('COPY bin ./bin');
    expect(
      runtime.lines.some((line) => /ln -s \/app\/bin\/cloudops\.mjs \/usr\/local\/bin\/cloudops/.test(line)),
    ).toBe(true);
    // What bin/cloudops.mjs imports at run time must be in the image too.
    for (const match of read('bin/cloudops.mjs').matchAll(/from '\.\.\/([^']+)'/g)) {
      expect(runtime.lines.some((line) => line.startsWith('COPY ') && line.includes(match[1]!))).toBe(true);
    }
  });

  it('runs the same command as `npm start`, compiled JavaScript, as a non-root user', () => {
    const [cmd] = instruction('CMD');
    expect(cmd).toBeDefined();
    expect(execForm(cmd!).join(' ')).toBe(pkg.scripts.start);
    // V8's memory-saving mode, and no compile job that allocates on V8's heap off the main thread (Maglev's code
    // and deoptimization data, Sparkplug's batches): such a job can wait for a collection only the main thread runs,
    // and a process could hang for ever inside process.exit (docs/operations.md#a-bot-that-never-exits;
    // bench/exit-hang.ts counts it).
    expect(pkg.scripts.start).toBe(
      'node --optimize-for-size --no-maglev-build-code-on-background --no-maglev-deopt-data-on-background --no-concurrent-sparkplug dist/src/main.js',
    );
    expect(pkg.scripts.prestart).toBe('node scripts/build.mjs --if-stale');
    const [user] = instruction('USER');
    expect(user).toBeDefined();
    expect(['root', '0']).not.toContain(user);
  });

  it('copies only paths that exist and are not excluded from the build context', () => {
    const ignored = read('.dockerignore')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && !line.startsWith('#'));
    expect(ignored).toContain('node_modules');
    expect(ignored).toContain('.git');
    expect(ignored).toContain('.env');
    const sources = stages
      .flatMap((stage) => stage.lines)
      .filter((line) => /^COPY\s/i.test(line) && !/--from=/.test(line))
      .flatMap((line) => line.split(/\s+/).slice(1, -1));
    expect(sources.length).toBeGreaterThan(0);
    for (const source of sources) {
      if (source === '.') continue;
      expect(existsSync(join(repo, source)), `COPY ${source}`).toBe(true);
      expect(ignored, `COPY ${source} is excluded by .dockerignore`).not.toContain(source);
    }
  });
});

/** The Dockerfile's global ARGs (before the first FROM), e.g. NODE_VERSION. */
function dockerArgs(): Record<string, string> {
  const head = read('Dockerfile').split(/^FROM\s/m)[0]!;
  return Object.fromEntries([...head.matchAll(/^ARG\s+(\w+)=(\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
}
const lockfile = JSON.parse(read('package-lock.json')) as { packages: Record<string, { version?: string }> };

describe('Node.js', () => {
  it('the suite runs on the LTS that engines, the node devDependency, @types/node and the image name', () => {
    const lts = major(pkg.engines.node);
    expect(lts).toBe(24);
    // npm scripts put node_modules/.bin first on the PATH, so `npm test` runs on the `node` package's binary.
    expect(major(process.versions.node)).toBeGreaterThanOrEqual(lts);
    expect(major(pkg.devDependencies.node!)).toBe(lts);
    expect(major(pkg.devDependencies['@types/node']!)).toBe(lts);
    expect(pkg.allowScripts?.node).toBe(true);
    expect(major(dockerArgs().NODE_VERSION!)).toBe(lts);
    expect(read('README.md')).toMatch(new RegExp(`Node\\.js ${lts}\\b`));
  });

  it('the image runs exactly the Node.js the tests run on: ARG NODE_VERSION is the lockfile’s node package', () => {
    const tested = lockfile.packages['node_modules/node']?.version;
    expect(tested).toMatch(/^\d+\.\d+\.\d+$/);
    expect(dockerArgs().NODE_VERSION).toBe(tested);
    // The suite itself: `npm test` runs vitest on node_modules/.bin/node.
    expect(process.versions.node).toBe(tested);
    for (const stage of stages)
      expect(stage.from).toMatch(/^FROM node:\$\{NODE_VERSION\}-bookworm-slim@\$\{NODE_DIGEST\}\s+AS\s+\w+$/);
  });

  it('pins every base image by digest (the tag kept for the reader) and says how to update it', () => {
    expect(dockerArgs().NODE_DIGEST).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(new Set(stages.map((s) => s.from.split(/\s+/)[1])).size).toBe(1);
    expect(read('Dockerfile')).toMatch(/docker buildx imagetools inspect node:X\.Y\.Z-bookworm-slim/);
  });

  it('carries the release’s SBOM, made in the build stage by the script `npm run release` uses', () => {
    expect(stages[0]!.lines).toContain('RUN node scripts/sbom.mjs /app/sbom.cdx.json');
    expect(runtime.lines).toContain('COPY --from=build /app/sbom.cdx.json ./sbom.cdx.json');
    expect(read('scripts/release.mjs')).toMatch(/import \{ sbomOf \} from '\.\/sbom\.mjs'/);
  });
});

describe('docker-compose.yml', () => {
  it('runs Redis 7 with the append-only file on, no eviction, and a volume', () => {
    const redis = compose.services.redis!;
    expect(redis.image).toMatch(/^redis:7\.\d+\.\d+-alpine@sha256:[0-9a-f]{64}$/);
    const command = (redis.command ?? []).join(' ');
    expect(command).toMatch(/--appendonly yes/);
    expect(command).toMatch(/--maxmemory-policy noeviction/);
    const volume = String(redis.volumes?.[0]).split(':')[0]!;
    expect(compose.volumes).toHaveProperty(volume);
  });

  it('runs every bot container with a read-only root filesystem, stopped within its 20 s plus a margin', () => {
    for (const name of ['bot', 'worker', 'scheduler', 'cloud-sim']) {
      expect((compose.services[name] as { read_only?: boolean }).read_only, name).toBe(true);
    }
    const grace = /stop_grace_period: (\d+)s/.exec(read('docker-compose.yml'));
    expect(Number(grace?.[1])).toBeGreaterThan(20);
    expect(Number(grace?.[1])).toBeLessThanOrEqual(30);
  });

  it('gives CLOUD_API_URL no fallback: a .env that forgets it stops the bot instead of pointing it at the simulator', () => {
    for (const name of ['bot', 'worker', 'scheduler']) {
      expect(compose.services[name]!.environment ?? {}, name).not.toHaveProperty('CLOUD_API_URL');
    }
    expect(read('docker-compose.yml')).not.toMatch(/CLOUD_API_URL:-/);
  });

  it('says it needs Compose 2.24+ (env_file with required: false), as the README does', () => {
    expect(compose.services.bot!.env_file?.[0]?.required).toBe(false);
    expect(read('docker-compose.yml')).toMatch(/Compose 2\.24 or later/);
    expect(read('README.md')).toMatch(/Compose 2\.24 or later/);
  });

  it('runs the bot (web), workers that can scale, and the scheduler against that Redis, env from .env', () => {
    const roles = Object.fromEntries(
      Object.entries(compose.services)
        .filter(([, service]) => service.environment?.ROLE)
        .map(([name, service]) => [service.environment!.ROLE, name]),
    );
    expect(roles).toEqual({ web: 'bot', worker: 'worker', scheduler: 'scheduler' });
    for (const name of ['bot', 'worker', 'scheduler']) {
      const service = compose.services[name]!;
      // .env's REDIS_URL wins when it has one; else compose's Redis as its ACL user, with .env's REDIS_PASSWORD.
      expect(service.environment?.REDIS_URL).toBe(
        // biome-ignore lint/suspicious/noTemplateCurlyInString: compose's interpolation, not a template
        '${REDIS_URL:-redis://cloudops:${REDIS_PASSWORD:?set REDIS_PASSWORD in .env (openssl rand -hex 32)}@redis:6379}',
      );
      expect(service.env_file?.[0]?.path).toBe('.env');
    }
    // `--scale worker=3` needs no fixed name and no published port.
    expect(compose.services.worker!.container_name).toBeUndefined();
    expect(compose.services.worker!.ports).toBeUndefined();
    expect(read('docker-compose.yml')).toMatch(/--scale worker=3/);
  });

  it('publishes ports on 127.0.0.1 only: the health port (and the simulator) are not on every interface', () => {
    const published = Object.entries(compose.services).flatMap(([name, service]) =>
      (service.ports ?? []).map((port) => [name, String(port)] as const),
    );
    expect(published.map(([name]) => name).sort()).toEqual(['bot', 'cloud-sim']);
    for (const [name, port] of published) expect(port, name).toMatch(/^127\.0\.0\.1:/);
  });

  it('gives the bot a health check on /healthz with node (no curl in the image)', () => {
    const test = compose.services.bot!.healthcheck?.test ?? [];
    expect(test.join(' ')).toMatch(/\/healthz/);
    expect(test[1]).toBe('node');
    expect(test.join(' ')).not.toMatch(/curl|wget/);
  });

  it('has a sim profile with the cloud simulator, which .env names to use it', () => {
    const sim = compose.services['cloud-sim']!;
    expect(sim.profiles).toEqual(['sim']);
    const command = (sim.command ?? []).join(' ');
    // The image has dist/ and no tsx: the compiled simulator.
    expect(command).toMatch(/^node dist\/sim\/cloud\/main\.js --port 8080\b/);
    expect(read('docker-compose.yml')).toMatch(/CLOUD_API_URL=http:\/\/cloud-sim:8080 in \.env/);
  });
});

describe('compose images', () => {
  it('pins every image it pulls by digest; the ones it builds come from the Dockerfile’s pinned base', () => {
    for (const [name, service] of Object.entries(compose.services)) {
      if (service.build) expect(service.image, name).toBe('cloudops:local');
      else expect(service.image, name).toMatch(/^[a-z0-9./-]+:[\w.-]+@sha256:[0-9a-f]{64}$/);
    }
  });
});

describe('compose’s Redis command, run for real', () => {
  it('one ACL user with REDIS_PASSWORD, the default user off, on no published port', async () => {
    const redis = compose.services.redis!;
    expect(redis.ports).toBeUndefined();
    expect(redis.environment?.REDIS_PASSWORD).toBe(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: compose's interpolation, not a template
      '${REDIS_PASSWORD:?set REDIS_PASSWORD in .env (openssl rand -hex 32)}',
    );
    // The command as compose runs it ($$ is compose's escaped $), with the ACL file in a temp dir, the image's
    // entrypoint as a pass-through, and loopback, a free port and a temp dir appended (its "$@").
    const dir = await mkdtemp(join(tmpdir(), 'cloudops-compose-redis-'));
    await writeFile(join(dir, 'docker-entrypoint.sh'), '#!/bin/sh\nexec "$@"\n', { mode: 0o755 });
    const [shell, flag, script, name] = (redis.command ?? []).map((part) => part.replaceAll('$$', '$'));
    expect([shell, flag, name]).toEqual(['sh', '-c', 'redis']);
    const port = await freePort();
    const password = 'compose-redis-pw-7f3a';
    const child = spawn(
      shell!,
      [
        flag!,
        script!.replaceAll('/tmp/users.acl', join(dir, 'users.acl')),
        name!,
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        dir,
      ],
      {
        env: { PATH: `${dir}:${process.env.PATH ?? ''}`, REDIS_PASSWORD: password },
        stdio: 'ignore',
        detached: true,
      },
    );
    const clients: Redis[] = [];
    const client = (options: RedisOptions) => {
      const c = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 1, ...options });
      c.on('error', () => undefined);
      clients.push(c);
      return c;
    };
    try {
      const user = client({ username: 'cloudops', password });
      await expect.poll(() => user.ping().catch(() => 'no'), { timeout: 20_000 }).toBe('PONG');
      await expect(client({}).ping()).rejects.toThrow(/NOAUTH/);
      await expect(client({ username: 'cloudops', password: 'wrong' }).ping()).rejects.toThrow(/WRONGPASS/);
      expect(await user.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
      expect(await user.config('GET', 'maxmemory-policy')).toEqual(['maxmemory-policy', 'noeviction']);
      // The ACL file holds the password's SHA-256, not the password.
      expect(await readFile(join(dir, 'users.acl'), 'utf8')).not.toContain(password);
    } finally {
      for (const c of clients) c.disconnect();
      if (child.pid) process.kill(-child.pid, 'SIGTERM');
      await new Promise((resolve) => setTimeout(resolve, 200));
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('the sim profile command, run for real', () => {
  it('starts the cloud simulator with the key compose gives it, answering the list endpoint', async () => {
    const sim = compose.services['cloud-sim']!;
    const [node, ...args] = sim.command ?? [];
    expect(node).toBe('node');
    // Same arguments, but loopback and a free port, as tests must listen.
    const local = args.map((arg, i) =>
      args[i - 1] === '--port' ? '0' : args[i - 1] === '--host' ? '127.0.0.1' : arg,
    );
    expect(local).toEqual(['dist/sim/cloud/main.js', '--port', '0', '--host', '127.0.0.1']);
    const child = spawn(process.execPath, local, {
      cwd: repo,
      env: { PATH: process.env.PATH ?? '', SIM_API_KEY: 'compose-test-key' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    try {
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
      });
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no URL printed: ${out}`)), 20_000);
        child.stdout.on('data', () => {
          // The URL line, then the key line: wait for both.
          const found = /listening on (http:\/\/127\.0\.0\.1:\d+)[\s\S]*API key: /.exec(out);
          if (found) {
            clearTimeout(timer);
            resolve(found[1]!);
          }
        });
      });
      expect(out).toContain('API key: compose-test-key');
      const list = await fetch(`${url}/cloud/cluster/`);
      expect(list.status).toBe(200);
      expect(((await list.json()) as { name: string }[]).map((c) => c.name)).toContain('zone-1');
    } finally {
      // End the process group we started.
      if (child.pid) process.kill(-child.pid, 'SIGTERM');
    }
  });
});

describe('health check commands, run against a real health server', () => {
  let server: Server;
  let port: number;
  beforeAll(async () => {
    const readiness = { redisPing: async () => true, policyLoaded: () => true };
    server = await startHealthServer(0, readiness);
    const address = server.address();
    port = typeof address === 'object' && address ? address.port : 0;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const commands = () => ({
    Dockerfile: execForm(instruction('HEALTHCHECK')[0]!.replace(/^.*CMD\s+/, '')),
    'docker-compose.yml': (compose.services.bot!.healthcheck?.test ?? []).slice(1),
  });

  it('exit 0 when /healthz answers and 1 when nothing listens', async () => {
    for (const [where, [command, ...args]] of Object.entries(commands())) {
      expect(command, where).toBe('node');
      const env = { PATH: process.env.PATH ?? '', PORT: String(port) };
      await expect(run(command!, args, { env }), where).resolves.toBeDefined();
      const closed = run(command!, args, { env: { ...env, PORT: '1' } });
      await expect(closed, where).rejects.toMatchObject({ code: 1 });
    }
  });
});
