/**
 * zod schemas of the service's answers, one per documented shape. Objects are loose: a field the spec does
 * not name is kept, never dropped, so a new API field neither breaks the bot nor disappears.
 */
import { z } from 'zod';

/** A price value: the spec says string; null stands for "not offered" and is tolerated. */
const price = z.string().nullish();

/** Shape A `price_model` (get cluster under `/api`). */
export const priceModelASchema = z.looseObject({
  vcore: price,
  vcore_50: price,
  vcore_25: price,
  vcore_off: price,
  ram: price,
  ram_off: price,
  storage_fast: price,
  public_ip: price,
  private_network_tag: price,
  private_network_external_vlan: price,
  cloud_gateway_standard: price,
  pbs_pool: price,
});

/** Shape B `price_model` (list clusters, get cluster without `/api`). */
export const priceModelBSchema = z.looseObject({
  vcore_regular: price,
  vcore_light: price,
  vcore_off: price,
  ram: price,
  ram_off: price,
  storage_fast: price,
  public_ip: price,
  private_network_tag: price,
  private_network_external_vlan: price,
  cloud_gateway_standard: price,
  pbs_pool: price,
});

/** Shape A cluster record: has `status`. */
export const clusterASchema = z.looseObject({
  name: z.string().min(1),
  description: z.string().nullish(),
  status: z.string(),
  location: z.string().nullish(),
  price_model: priceModelASchema,
});

/** Shape B cluster record: no `status`. */
export const clusterBSchema = z.looseObject({
  name: z.string().min(1),
  description: z.string().nullish(),
  location: z.string().nullish(),
  price_model: priceModelBSchema,
});

export const clusterListSchema = z.array(clusterBSchema);

/** Restore answer: an asynchronous task id and a message. */
export const restoreResponseSchema = z.looseObject({ task_id: z.string().min(1), message: z.string() });

/** Resize answer: a message. */
export const resizeResponseSchema = z.looseObject({ message: z.string() });

export type ClusterAWire = z.infer<typeof clusterASchema>;
export type ClusterBWire = z.infer<typeof clusterBSchema>;
