/**
 * Response bodies kept per request key, so that a body built again byte for byte as it was last
 * sent is handed back as the very buffer sent before. The entity tag (etag.ts) and the compressed
 * forms (encoding.ts) are kept per buffer, so a repeated answer is neither hashed nor compressed
 * again: for most of the answers the service repeats (counts, `$apply` groups, records by key,
 * pages with expansions) those two were most of the service's own cost. Pages written from the
 * records' kept texts come back as the same buffer already (src/exec/record-json.ts `pageBytes`);
 * this covers every other one-buffer body.
 *
 * Exact by construction: a kept buffer is used only when its bytes equal the new body's (a memcmp),
 * so the key only decides which body a new one is compared with, never what is sent. It names what
 * shapes the bytes of a request (path, raw query, the account's sources, OData version, base URL,
 * page-size preference); the data generation and the clock (DaysOnMarket, `now()`) are left to the
 * comparison. Bounded by entries and bytes; the least recently used body goes first.
 */

/** Bodies kept, and their bytes in all; a body larger than MAX_BODY_BYTES is not kept. */
export const MAX_KEPT_BODIES = 1024;
export const MAX_KEPT_BYTES = 16 * 1024 * 1024;
const MAX_BODY_BYTES = MAX_KEPT_BYTES / 8;

export class KeptBodies {
  /** The last body per key (insertion order: the least recently used first). */
  private readonly bodies = new Map<string, Buffer>();
  private size = 0;

  constructor(
    private readonly maxBodies = MAX_KEPT_BODIES,
    private readonly maxBytes = MAX_KEPT_BYTES,
    private readonly maxBodyBytes = MAX_BODY_BYTES,
  ) {}

  /** The body last kept under `key` when its bytes are `body`'s, else `body` (now kept under the key). */
  same(key: string, body: Buffer): Buffer {
    const bodies = this.bodies;
    const last = bodies.get(key);
    if (last !== undefined) {
      bodies.delete(key);
      if (last === body || last.equals(body)) {
        bodies.set(key, last); // the most recently used now
        return last;
      }
      this.size -= last.byteLength;
    }
    if (body.byteLength > this.maxBodyBytes) return body;
    bodies.set(key, body);
    this.size += body.byteLength;
    for (const [k, b] of bodies) {
      if (bodies.size <= this.maxBodies && this.size <= this.maxBytes) break;
      bodies.delete(k);
      this.size -= b.byteLength;
    }
    return body;
  }

  /** Bodies kept. */
  get count(): number {
    return this.bodies.size;
  }

  /** Bytes of the bodies kept. */
  get heldBytes(): number {
    return this.size;
  }
}
