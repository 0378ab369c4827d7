// GET /lora-adapters and POST /lora-adapters: the server-wide adapter scales.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody } from '../../http/validation.js';
import { badRequest } from '../errors.js';
import { BODY_OPTIONS, LoraAdaptersBody } from '../schemas.js';
import type { Admitted } from '../guards.js';

const Body = compileBody(LoraAdaptersBody, BODY_OPTIONS);

export function handleListLoraAdapters({ service }: Admitted): HttpResult {
  return { body: service.lora.list() };
}

/** Adapters listed take the given scale, the others 0 (as llama-server); answers the new list. */
export function handleSetLoraAdapters({ service }: Admitted, req: HttpRequest): HttpResult {
  const body = Body.parse(req);
  const items = Array.isArray(body) ? body : body.lora_adapters;
  const field = Array.isArray(body) ? 'body' : 'lora_adapters';
  items.forEach((item, i) => {
    if (item.id === undefined && item.path === undefined) {
      throw badRequest(`Invalid field "${field}[${i}]": give the adapter's "id" or "path"`, { field: `${field}[${i}]` });
    }
  });
  service.lora.apply(service.lora.resolve(items, field));
  return { body: { success: true, lora_adapters: service.lora.list() } };
}
