/**
 * Exact decimal numbers for prices (docs/requests.md#prices): a BigInt count of units at a decimal scale, so
 * 0.1 + 0.2 is 0.3 and no binary float ever reaches a figure that is shown.
 */

/** A string that is not a plain decimal number, or an operation that has no exact answer. */
export class DecimalError extends Error {
  override readonly name = 'DecimalError';
  readonly code = 'DECIMAL_INVALID';
}

const PLAIN = /^([+-]?)(\d*)(?:\.(\d*))?$/;
/** More fractional digits than any price needs; refuses absurd inputs instead of building huge BigInts. */
const MAX_SCALE = 40;

const TEN = 10n;
const pow10 = (n: number): bigint => TEN ** BigInt(n);

/** An immutable exact decimal: `units / 10^scale`. */
export class Decimal {
  private constructor(
    /** The value times 10^scale. */
    readonly units: bigint,
    /** Digits after the decimal point. */
    readonly scale: number,
  ) {}

  static readonly ZERO = new Decimal(0n, 0);

  /** The value `units / 10^scale`. */
  static fromUnits(units: bigint, scale: number): Decimal {
    if (!Number.isInteger(scale) || scale < 0) throw new DecimalError(`${scale} is not a decimal scale`);
    return new Decimal(units, scale);
  }

  /**
   * Parses a plain decimal string such as "0.0123", "12", "-3.5" or ".5" (surrounding spaces allowed).
   * Exponents, commas, "NaN", "Infinity" and empty strings throw {@link DecimalError}.
   */
  static parse(text: string): Decimal {
    if (typeof text !== 'string') throw new DecimalError(`expected a decimal string, got ${typeof text}`);
    const trimmed = text.trim();
    const match = PLAIN.exec(trimmed);
    const whole = match?.[2] ?? '';
    const fraction = match?.[3] ?? '';
    if (!match || (whole === '' && fraction === '')) {
      throw new DecimalError(`"${trimmed.slice(0, 40)}" is not a decimal number such as 0.0123`);
    }
    if (fraction.length > MAX_SCALE)
      throw new DecimalError(`"${trimmed.slice(0, 40)}…" has too many decimal places`);
    const units = BigInt(`${whole || '0'}${fraction}`);
    return new Decimal(match[1] === '-' ? -units : units, fraction.length);
  }

  /** A whole number; refuses anything that is not a safe integer, so floats cannot sneak in. */
  static fromInteger(n: number | bigint): Decimal {
    if (typeof n === 'bigint') return new Decimal(n, 0);
    if (!Number.isSafeInteger(n)) throw new DecimalError(`${n} is not a whole number`);
    return new Decimal(BigInt(n), 0);
  }

  /** Sums decimals exactly; the sum of nothing is 0. */
  static sum(values: Iterable<Decimal>): Decimal {
    let total = Decimal.ZERO;
    for (const value of values) total = total.add(value);
    return total;
  }

  private rescaled(scale: number): bigint {
    return this.units * pow10(scale - this.scale);
  }

  add(other: Decimal): Decimal {
    const scale = Math.max(this.scale, other.scale);
    return new Decimal(this.rescaled(scale) + other.rescaled(scale), scale);
  }

  sub(other: Decimal): Decimal {
    return this.add(other.neg());
  }

  neg(): Decimal {
    return new Decimal(-this.units, this.scale);
  }

  /** Multiplies exactly by a decimal or a whole number. */
  mul(other: Decimal | number | bigint): Decimal {
    const factor = other instanceof Decimal ? other : Decimal.fromInteger(other);
    return new Decimal(this.units * factor.units, this.scale + factor.scale).trimmed();
  }

  /** Negative, zero or positive as this is below, equal to or above `other`. */
  compare(other: Decimal): -1 | 0 | 1 {
    const scale = Math.max(this.scale, other.scale);
    const a = this.rescaled(scale);
    const b = other.rescaled(scale);
    return a < b ? -1 : a > b ? 1 : 0;
  }

  equals(other: Decimal): boolean {
    return this.compare(other) === 0;
  }

  isZero(): boolean {
    return this.units === 0n;
  }

  /** -1, 0 or 1. */
  sign(): -1 | 0 | 1 {
    return this.units < 0n ? -1 : this.units > 0n ? 1 : 0;
  }

  /** The same value without trailing fractional zeros (1.2300 → 1.23). */
  trimmed(): Decimal {
    let { units, scale } = this;
    while (scale > 0 && units % TEN === 0n) {
      units /= TEN;
      scale--;
    }
    return new Decimal(units, scale);
  }

  /** Rounds to `digits` decimal places, half away from zero (2.345 → 2.35, -2.345 → -2.35). */
  round(digits: number): Decimal {
    if (!Number.isInteger(digits) || digits < 0 || digits > MAX_SCALE) {
      throw new DecimalError(`cannot round to ${digits} decimal places`);
    }
    if (digits >= this.scale) return new Decimal(this.rescaled(digits), digits);
    const divisor = pow10(this.scale - digits);
    const magnitude = this.units < 0n ? -this.units : this.units;
    let quotient = magnitude / divisor;
    if ((magnitude % divisor) * 2n >= divisor) quotient += 1n;
    return new Decimal(this.units < 0n ? -quotient : quotient, digits);
  }

  /** Exactly `digits` decimal places, rounded half away from zero; never "-0.00". */
  toFixed(digits: number): string {
    const rounded = this.round(digits);
    const negative = rounded.units < 0n;
    const digitsText = (negative ? -rounded.units : rounded.units).toString().padStart(digits + 1, '0');
    const whole = digitsText.slice(0, digitsText.length - digits);
    const fraction = digits > 0 ? `.${digitsText.slice(digitsText.length - digits)}` : '';
    return `${negative ? '-' : ''}${whole}${fraction}`;
  }

  /** The exact value, without trailing fractional zeros. */
  toString(): string {
    const t = this.trimmed();
    return t.toFixed(t.scale);
  }

  toJSON(): string {
    return this.toString();
  }
}

/** Parses a decimal string, or a Decimal passed through. */
export function decimal(value: string | Decimal): Decimal {
  return value instanceof Decimal ? value : Decimal.parse(value);
}

/**
 * The change from `before` to `after` in percent, rounded half away from zero to `digits` places (default 1),
 * e.g. 0.0100 → 0.0115 gives "15.0". Undefined when `before` is zero, where no percentage exists.
 */
export function percentChange(before: Decimal, after: Decimal, digits = 1): string | undefined {
  if (before.isZero()) return undefined;
  const scale = Math.max(before.scale, after.scale);
  const b = before.units * pow10(scale - before.scale);
  const a = after.units * pow10(scale - after.scale);
  // One digit past the wanted ones, truncated: that digit alone decides half-up rounding correctly.
  const extra = digits + 1;
  return Decimal.fromUnits(((a - b) * 100n * pow10(extra)) / b, extra).toFixed(digits);
}
