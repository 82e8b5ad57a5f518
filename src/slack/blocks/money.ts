import type { Decimal } from '../../rules/decimal.ts';

/** Hourly figures keep four places (prices are fractions of a cent); monthly ones two. */
export const HOURLY_DIGITS = 4;
export const MONTHLY_DIGITS = 2;

/** The reference VM's cost in one cluster, ready to show. */
export interface CostView {
  hourly?: string;
  monthly?: string;
  /** Price fields the cost needed and the cluster did not list. */
  missing: string[];
  cheapest: boolean;
}

export function hourlyText(value: Decimal): string {
  return value.toFixed(HOURLY_DIGITS);
}

export function monthlyText(value: Decimal): string {
  return value.toFixed(MONTHLY_DIGITS);
}

/** "0.0312 EUR/h · 22.78 EUR/mo", or why it cannot be told. */
export function costLine(cost: CostView, currency: string): string {
  if (cost.hourly === undefined || cost.monthly === undefined) {
    return cost.missing.length > 0 ? `n/a (no ${cost.missing.join(', ')} price)` : 'n/a';
  }
  return `${cost.hourly} ${currency}/h · ${cost.monthly} ${currency}/mo`;
}
