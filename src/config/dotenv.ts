import { readFileSync } from 'node:fs';
import { parseEnv } from 'node:util';
import { ConfigError } from './env.ts';

/**
 * The environment with the variables of a `.env` file added underneath: a variable the environment sets wins over
 * the file, as with `node --env-file`; an empty one counts as unset (as in `loadEnv`), so the file fills it.
 * No file: the environment as it is.
 */
export function withDotEnv(
  env: Record<string, string | undefined>,
  path: string,
): Record<string, string | undefined> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return env;
    throw new ConfigError(`${path}: could not be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const set = Object.entries(env).filter(([, value]) => value !== undefined && value !== '');
  return { ...parseEnv(text), ...Object.fromEntries(set) };
}
