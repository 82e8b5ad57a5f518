/** The service's resources as the bot uses them, independent of the two wire shapes. */

/**
 * Hourly prices of one cluster, normalised from Shape A or Shape B. Values are the API's decimal strings,
 * untouched. `vcoreRegular` is Shape B `vcore_regular` or Shape A `vcore`; `vcoreLight` is Shape B
 * `vcore_light` or Shape A `vcore_50` (assumed: the spec does not relate the two shapes). Every other
 * field the API sends, known or not, is kept in `other` under its wire name.
 */
export interface PriceModel {
  vcoreRegular?: string;
  vcoreLight?: string;
  vcoreOff?: string;
  ram?: string;
  ramOff?: string;
  storageFast?: string;
  publicIp?: string;
  privateNetworkTag?: string;
  other: Record<string, string>;
}

/** One cluster (zone). `status` exists only where the API said it (Shape A). */
export interface Cluster {
  name: string;
  description: string;
  location: string;
  status?: string;
  prices: PriceModel;
  /** Which wire shape it came from. */
  shape: 'A' | 'B';
  /** Fields of the record the bot does not know, kept as sent. */
  extra: Record<string, unknown>;
}

/** A resize request body as the API receives it: documented fields plus the configured named ones. */
export type ResizeBody = Record<string, string | number>;

/** A restore request body: `autostart` is the only named option. */
export interface RestoreBody {
  autostart?: boolean;
}

export interface ResizeResult {
  message: string;
  /** The HTTP status of the success answer. */
  status: number;
}

export interface RestoreResult {
  taskId: string;
  message: string;
  status: number;
}

/** Per-call options: an abort signal lets SIGTERM and tests bound a call. */
export interface CallOptions {
  signal?: AbortSignal;
}

/** The service's four documented operations. Implemented over undici by `CloudApiClient`. */
export interface CloudApi {
  listClusters(options?: CallOptions): Promise<Cluster[]>;
  /** Shape A (`/api/cloud/cluster/{name}/`) when `shape` is 'A', else Shape B. */
  getCluster(name: string, shape?: 'A' | 'B', options?: CallOptions): Promise<Cluster>;
  resize(projectUuid: string, vmid: number, body: ResizeBody, options?: CallOptions): Promise<ResizeResult>;
  restore(
    projectUuid: string,
    vmid: number,
    backupSlug: string,
    body: RestoreBody,
    options?: CallOptions,
  ): Promise<RestoreResult>;
}
