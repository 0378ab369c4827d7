// The Prometheus text exposition format parsed by a library (parse-prometheus-text-format), with
// the shape it returns typed, and lookups by family name and labels.
import { createRequire } from 'node:module';

export interface Sample {
  value: string;
  labels?: Record<string, string>;
}

export interface Family {
  name: string;
  help: string;
  type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
  metrics: Sample[];
}

const parse = createRequire(import.meta.url)('parse-prometheus-text-format') as (text: string) => Family[];

export function parseMetrics(text: string): Map<string, Family> {
  return new Map(parse(text).map((f) => [f.name, f]));
}

/** The one sample of a family without labels (or its first), as a number; throws when the family is missing. */
export function gauge(families: Map<string, Family>, name: string): number {
  const family = families.get(name);
  if (!family) throw new Error(`no metric ${name}`);
  return Number(family.metrics[0]!.value);
}
