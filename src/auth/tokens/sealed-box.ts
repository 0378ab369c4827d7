// Secrets at rest: AES-256-GCM under a key derived from the master key, with a label (a kid, an
// endpoint id) authenticated as associated data, so a sealed value copied to another row does
// not open there. Signing keys' private keys and webhook secrets are stored this way.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const FORMAT_VERSION = 1;

/** version(1) | iv(12) | tag(16) | ciphertext. */
export function seal(key: Buffer, plaintext: Buffer, label: string): Buffer {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(label));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([Buffer.from([FORMAT_VERSION]), iv, cipher.getAuthTag(), ciphertext]);
}

/** Throws when the key or the label is not the one that sealed the value. */
export function unseal(key: Buffer, sealed: Buffer, label: string): Buffer {
  if (sealed[0] !== FORMAT_VERSION) throw new Error(`unknown sealed format ${sealed[0]}`);
  const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(1, 13));
  decipher.setAAD(Buffer.from(label));
  decipher.setAuthTag(sealed.subarray(13, 29));
  return Buffer.concat([decipher.update(sealed.subarray(29)), decipher.final()]);
}
