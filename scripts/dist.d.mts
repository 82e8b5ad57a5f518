/** Written by `npm run build` after tsc succeeded; its mtime is the build's. */
export declare const STAMP: string;
/** `current`, `stale` (a compiled input changed since the build) or `missing` (never built). */
export declare function distState(root: string): 'current' | 'stale' | 'missing';
