// The daemon's record of the config it accepted (its validated form, on the daemon row of the
// store): packed, because a validated config repeats every default in every job (4.7 MB of JSON
// for 10,000 jobs, where the YAML was 0.56 MB), and the row is written, fsync'd, at every start
// and accepted reload. Deflated and base64'd behind a `z:` prefix; plain JSON (a record from
// before the packing) reads as well.
import { deflateRawSync, inflateRawSync } from "node:zlib";

const PACKED = "z:";

export function packConfig(config: unknown): string {
  return PACKED + deflateRawSync(JSON.stringify(config)).toString("base64");
}

/** The validated config a record holds; throws on a record that is neither form. */
export function unpackConfig(record: string): unknown {
  const json = record.startsWith(PACKED)
    ? inflateRawSync(Buffer.from(record.slice(PACKED.length), "base64")).toString("utf8")
    : record;
  return JSON.parse(json);
}
