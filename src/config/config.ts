import { type Env, loadEnv } from './env.ts';
import { loadPolicy, type Policy } from './policy.ts';

/** Everything the process is configured with: the environment and the policy file. */
export interface Config {
  env: Env;
  policy: Policy;
}

/** Loads the environment and the policy file; throws a ConfigError or a PolicyError listing its problems. */
export async function loadConfig(raw: Record<string, string | undefined>): Promise<Config> {
  const env = loadEnv(raw);
  const policy = await loadPolicy(env.POLICY_FILE);
  return { env, policy };
}
