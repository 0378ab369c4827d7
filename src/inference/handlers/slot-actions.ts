// POST /slots/{id_slot}?action=save|restore|erase (--slot-save-path), as llama-server answers it:
// save and restore name one file of the --slot-save-path directory in the body's "filename"; a
// busy slot is answered once its task ends.
import { Type } from '@sinclair/typebox';
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody } from '../../http/validation.js';
import { isNativeError, type SlotActionResult, type SlotActionSpec } from '../../native/binding.js';
import { nativeErrorToHttp } from '../engine/native-errors.js';
import { ErrorType, badRequest, inferenceError } from '../errors.js';
import { BODY_OPTIONS } from '../schemas.js';
import type { InferenceService } from '../service/service.js';
import { isValidSlotFilename } from '../service/slot-filename.js';
import type { Admitted } from '../guards.js';

const FileBody = compileBody(Type.Object({ filename: Type.String() }), BODY_OPTIONS);

/** llama-server reads the id with std::stoi: leading blanks, a sign, digits, and whatever follows ignored. */
function slotId(text: string | undefined, nParallel: number): number {
  const match = /^\s*([+-]?\d+)/.exec(text ?? '');
  const id = match ? Number(match[1]) : NaN;
  if (!Number.isInteger(id) || id < 0 || id >= nParallel) throw badRequest('Invalid slot ID');
  return id;
}

async function run(service: InferenceService, spec: SlotActionSpec): Promise<SlotActionResult> {
  try {
    return await service.engine.native.slotAction(spec);
  } catch (err) {
    throw isNativeError(err) ? nativeErrorToHttp(err) : err;
  }
}

export async function handleSlotAction({ service }: Admitted, req: HttpRequest): Promise<HttpResult> {
  const dir = service.settings.slotSavePath;
  if (dir === undefined) {
    throw inferenceError(ErrorType.NOT_SUPPORTED, 'This server does not support slots action. Start it with `--slot-save-path`');
  }
  const id = slotId(req.params.id_slot, service.info.nParallel);
  const action = req.query.get('action');
  if (action === 'erase') {
    const r = await run(service, { action, slot: id });
    return { body: { id_slot: id, n_erased: r.nTokens } };
  }
  if (action !== 'save' && action !== 'restore') throw badRequest('Invalid action');
  const { filename } = FileBody.parse(req);
  if (!isValidSlotFilename(filename)) throw badRequest('Invalid filename');
  const r = await run(service, { action, slot: id, dir, filename });
  return action === 'save'
    ? { body: { id_slot: id, filename, n_saved: r.nTokens, n_written: r.nBytes, timings: { save_ms: r.ms } } }
    : { body: { id_slot: id, filename, n_restored: r.nTokens, n_read: r.nBytes, timings: { restore_ms: r.ms } } };
}
