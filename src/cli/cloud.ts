import { stat } from 'node:fs/promises';
import { CloudApiClient } from '../cloud/client.ts';
import { loadPolicy, type Policy, parsePolicy } from '../config/policy.ts';
import { CliError, type CliIo } from './io.ts';

/** A client on CLOUD_API_URL; `needsKey` for the calls that take the bearer key. Closed by `use`. */
export async function withCloud<T>(
  io: CliIo,
  needsKey: boolean,
  use: (client: CloudApiClient) => Promise<T>,
): Promise<T> {
  const baseUrl = io.env.CLOUD_API_URL;
  if (!baseUrl)
    throw new CliError('CLOUD_API_URL: not set; expected the API base URL, e.g. https://api.example.com');
  if (needsKey && !io.env.CLOUD_API_KEY)
    throw new CliError('CLOUD_API_KEY: not set; this call needs the bearer API key');
  const client = new CloudApiClient({ baseUrl, apiKey: io.env.CLOUD_API_KEY, proxy: io.env });
  try {
    return await use(client);
  } finally {
    await client.close();
  }
}

/** The policy from POLICY_FILE; errors name file:line:field. */
export function policyOf(io: CliIo, file?: string): Promise<Policy> {
  return loadPolicy(file ?? io.env.POLICY_FILE);
}

/**
 * The policy when there is one: a missing default `./policy.yml` means the defaults (currency, reference VM), but
 * a POLICY_FILE set explicitly must exist, and a broken file is always an error.
 */
export async function optionalPolicy(io: CliIo): Promise<Policy> {
  if (!io.policyFileSet) {
    const found = await stat(io.env.POLICY_FILE).then(
      () => true,
      () => false,
    );
    if (!found) return parsePolicy('', 'defaults');
  }
  return loadPolicy(io.env.POLICY_FILE);
}
