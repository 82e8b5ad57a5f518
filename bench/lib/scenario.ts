import type { Redis } from 'ioredis';
import type { BenchConfig } from './config.ts';
import type { Spread } from './stats.ts';
import type { Row } from './table.ts';

/** A pass/fail statement: correctness checks fail the bench, targets are only reported. */
export interface Check {
  name: string;
  ok: boolean;
  detail: string;
  /** For an issue target: the bot's figure, the baseline's and their ratio (per pair), and the limit as written. */
  figure?: Spread;
  baseline?: Spread;
  ratio?: Spread;
  limit?: string;
  /** Unit of figure and baseline (ms, B, /s). */
  unit?: string;
  /** For a target: why it is missed when it is (the floor it hits, where the profile says the cost is). */
  whyMissed?: string;
}

/** What one scenario hands back: table rows (medians), everything measured, checks and targets. */
export interface ScenarioResult {
  rows: Row[];
  /** Every figure of every run, the medians and the baseline's, for results.json. */
  data: Record<string, unknown>;
  checks: Check[];
  targets: Check[];
}

/** What every scenario gets from main.ts. */
export interface BenchContext {
  config: BenchConfig;
  redisUrl: string;
  /** A client for the bench's own reads/writes and cleanup (maxRetriesPerRequest: null). */
  redis: Redis;
  /** A fresh Redis prefix for one bot/baseline, deleted by main.ts at the end. */
  newPrefix(name: string): string;
  /**
   * A fresh prefix as long as the bot's default (`cloudops`, 8 characters), deleted likewise: for figures that count
   * bytes, where the bench's long prefixes would add their extra length to every key name.
   */
  productLengthPrefix(): string;
  /** Where the bots' logs go (one file for the whole run). */
  logFile: string;
  log(message: string): void;
}

export type Scenario = (ctx: BenchContext) => Promise<ScenarioResult>;
