// The master key: 32 random bytes in `<key directory>/master.key` (base64, mode 0600), created at
// the first start. It never signs anything itself; purpose-specific keys are derived from it
// with HKDF: the key that encrypts signing keys at rest, and the key of the one-time-code HMAC.
// Instances that share a database must share this file.
import { hkdfSync, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';

export type KeyPurpose = 'signing-key-encryption' | 'otp-code-hash' | 'webhook-secret-encryption' | 'upstream-secret-encryption' | 'totp-secret-encryption' | 'recovery-code-hash';

export interface MasterKey {
  /** A 32-byte key for one purpose; the same master key always derives the same bytes. */
  derive(purpose: KeyPurpose): Buffer;
}

const FILE_NAME = 'master.key';

/** Reads the master key from the directory, creating directory and key when absent. */
export async function loadMasterKey(keyDirectory: string): Promise<MasterKey> {
  await fs.mkdir(keyDirectory, { recursive: true, mode: 0o700 });
  const file = path.join(keyDirectory, FILE_NAME);
  if (!existsSync(file)) {
    // Written aside, then linked into place: link() fails when the file exists, so two processes
    // starting at once agree on one key, and no reader ever sees a half-written file.
    const candidate = path.join(keyDirectory, `.${FILE_NAME}.${process.pid}.${randomBytes(4).toString('hex')}`);
    await fs.writeFile(candidate, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
    try {
      await fs.link(candidate, file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    } finally {
      await fs.rm(candidate, { force: true });
    }
  }
  const secret = Buffer.from((await fs.readFile(file, 'utf8')).trim(), 'base64');
  if (secret.length !== 32) throw new Error(`${file} does not hold a base64 32-byte key`);
  return masterKeyFromBytes(secret);
}

export function masterKeyFromBytes(secret: Buffer): MasterKey {
  return {
    derive: (purpose) => Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), `auth-service ${purpose}`, 32)),
  };
}
