/**
 * Runs the cloud simulator standalone: `npm run sim -- --port 8787 [--seed seed.json] [--host 0.0.0.0]`.
 * Prints its URL and the API key it accepts (env SIM_API_KEY, default `sim-key`); stops on SIGTERM/SIGINT.
 */
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { type CloudSim, DEFAULT_SIM_API_KEY, type SimSeed, startCloudSim } from './server.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '8787' },
    host: { type: 'string', default: '127.0.0.1' },
    seed: { type: 'string' },
  },
});

const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`--port: expected a port from 0 to 65535, got ${values.port}`);
  process.exit(2);
}
let seed: SimSeed | undefined;
if (values.seed) {
  try {
    seed = JSON.parse(await readFile(values.seed, 'utf8')) as SimSeed;
  } catch (error) {
    console.error(`--seed ${values.seed}: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(2);
  }
}

// Handlers go in before the server starts, so a signal during start-up still ends the process cleanly.
let sim: CloudSim | undefined;
let stopping = false;
const stop = async (signal: string) => {
  if (stopping) return;
  stopping = true;
  console.log(`cloud sim stopping (${signal})`);
  await sim?.close();
  process.exit(0);
};
process.on('SIGTERM', () => void stop('SIGTERM'));
process.on('SIGINT', () => void stop('SIGINT'));

sim = await startCloudSim({
  port,
  host: values.host,
  seed,
  apiKey: process.env.SIM_API_KEY || DEFAULT_SIM_API_KEY,
});
console.log(`cloud sim listening on ${sim.url}`);
console.log(`API key: ${sim.apiKey}  (control: GET ${sim.url}/_sim/state)`);
