/** A runtime package as package-lock.json lists it. */
export interface RuntimePackage {
  name: string;
  version: string;
  /** The SPDX expression of its `license` field; empty when it gives none. */
  license: string;
  optional: boolean;
}
/** Licences that put no condition on the code of the user's own. */
export declare const ALLOWED: ReadonlySet<string>;
/** Whether an SPDX expression is acceptable (`OR`: one side allowed, `AND`: both). */
export declare function allowed(expression: unknown): boolean;
/** The runtime packages of a package-lock.json (v2/v3), sorted. */
export declare function runtimePackages(lock: {
  packages?: Record<string, Record<string, unknown>>;
}): RuntimePackage[];
/** docs/licenses.md for `packages`. */
export declare function render(packages: RuntimePackage[]): string;
/** `--check`'s problems: refused licences, a stale list. */
export declare function check(packages: RuntimePackage[], written: string): string[];
