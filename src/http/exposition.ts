// Prometheus text exposition format 0.0.4, written by hand (no client library): each family is
// `# HELP`, `# TYPE`, then its samples. Also the one metric type that needs more than a number,
// the histogram. Pure: no Bun, no relay.

export const CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

type MetricType = "counter" | "gauge" | "histogram";
type Labels = readonly (readonly [string, string])[];

/** Label values escape backslash, double quote and newline (the format's only three escapes there). */
const escapeLabelValue = (v: string): string => v.replace(/[\\"\n]/g, (c) => (c === "\n" ? "\\n" : `\\${c}`));

/** HELP text escapes only backslash and newline. */
const escapeHelp = (v: string): string => v.replace(/[\\\n]/g, (c) => (c === "\n" ? "\\n" : "\\\\"));

/** Go-style float text: integers plainly, and the spellings Prometheus expects for the specials. */
function formatValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  return String(v);
}

const labelText = (labels: Labels): string =>
  labels.length === 0 ? "" : `{${labels.map(([k, v]) => `${k}="${escapeLabelValue(v)}"`).join(",")}}`;

/**
 * Cumulative-on-render histogram: observe() only finds a bucket and bumps two numbers, so it can
 * sit on a hot path; the cumulative counts the format wants are summed at scrape time.
 */
export class Histogram {
  /** Per-bucket counts (not cumulative); the last slot is everything above the top bound. */
  private readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(v: number): void {
    let i = 0;
    while (i < this.bounds.length && v > this.bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += v;
    this.count++;
  }

  /** Cumulative counts per bound, then the +Inf bucket (= count). */
  cumulative(): number[] {
    let acc = 0;
    return Array.from(this.counts, (n) => (acc += n));
  }
}

/** Collects families in order and renders the text body. */
export class Exposition {
  private readonly lines: string[] = [];
  private readonly declared = new Set<string>();

  /** Starts a family; every sample written after it until the next family belongs to it. */
  family(name: string, type: MetricType, help: string): this {
    // A family declared twice is invalid exposition: a programming error, not a scrape-time condition.
    if (this.declared.has(name)) throw new Error(`metric family ${name} declared twice`);
    this.declared.add(name);
    this.lines.push(`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} ${type}`);
    return this;
  }

  sample(name: string, value: number, labels: Labels = []): this {
    this.lines.push(`${name}${labelText(labels)} ${formatValue(value)}`);
    return this;
  }

  /** One family holding a single sample. */
  single(name: string, type: "counter" | "gauge", help: string, value: number): this {
    return this.family(name, type, help).sample(name, value);
  }

  histogram(name: string, help: string, h: Histogram): this {
    this.family(name, "histogram", help);
    const cumulative = h.cumulative();
    h.bounds.forEach((b, i) => this.sample(`${name}_bucket`, cumulative[i]!, [["le", formatValue(b)]]));
    this.sample(`${name}_bucket`, cumulative.at(-1)!, [["le", "+Inf"]]);
    this.sample(`${name}_sum`, h.sum);
    return this.sample(`${name}_count`, h.count);
  }

  text(): string {
    return `${this.lines.join("\n")}\n`;
  }
}
