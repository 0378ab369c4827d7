// Route table lookup: exact paths in a map, parameterised paths (`/admin/apps/:app_id/tenants`)
// matched segment by segment. Built once at start; lookups allocate only for parameters.
import type { HttpRequest, HttpResult } from './request.js';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export type Handler = (req: HttpRequest) => Promise<HttpResult | void> | HttpResult | void;

export interface Route {
  method: Method;
  path: string;
  handler: Handler;
}

export type RouteMatch =
  | { kind: 'found'; handler: Handler; params: Record<string, string>; /** The route's template. */ route: string }
  | { kind: 'wrong-method'; allowed: Method[] }
  | { kind: 'not-found' };

interface PatternRoute {
  segments: string[];
  route: Route;
}

const NO_PARAMS: Record<string, string> = Object.freeze(Object.create(null));

export class Router {
  private readonly exact = new Map<string, Map<Method, Handler>>();
  private readonly patterns: PatternRoute[] = [];

  constructor(routes: readonly Route[]) {
    for (const route of routes) this.add(route);
  }

  add(route: Route): void {
    if (!route.path.includes(':')) {
      const byMethod = this.exact.get(route.path) ?? new Map<Method, Handler>();
      if (byMethod.has(route.method)) throw new Error(`duplicate route ${route.method} ${route.path}`);
      byMethod.set(route.method, route.handler);
      this.exact.set(route.path, byMethod);
      return;
    }
    this.patterns.push({ segments: route.path.split('/'), route });
  }

  find(method: string, path: string): RouteMatch {
    const byMethod = this.exact.get(path);
    if (byMethod) {
      const handler = byMethod.get(method as Method);
      if (handler) return { kind: 'found', handler, params: NO_PARAMS, route: path };
    }
    const allowed: Method[] = byMethod ? [...byMethod.keys()] : [];
    const segments = path.split('/');
    for (const { segments: pattern, route } of this.patterns) {
      const params = matchSegments(pattern, segments);
      if (!params) continue;
      if (route.method === method) return { kind: 'found', handler: route.handler, params, route: route.path };
      allowed.push(route.method);
    }
    return allowed.length > 0 ? { kind: 'wrong-method', allowed } : { kind: 'not-found' };
  }
}

function matchSegments(pattern: string[], segments: string[]): Record<string, string> | null {
  if (pattern.length !== segments.length) return null;
  const params: Record<string, string> = Object.create(null);
  for (let i = 0; i < pattern.length; i++) {
    const expected = pattern[i]!;
    const actual = segments[i]!;
    if (expected.startsWith(':')) {
      if (actual === '') return null;
      try {
        params[expected.slice(1)] = decodeURIComponent(actual);
      } catch {
        return null;
      }
    } else if (expected !== actual) {
      return null;
    }
  }
  return params;
}
