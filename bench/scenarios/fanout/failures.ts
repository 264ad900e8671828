// Failures of a fanout run, by kind with a count and a few examples; a receiver thread sends its
// entries() to the main thread, which merges them.

export type FailureEntry = [kind: string, count: number, examples: string[]];

export class FailureLog {
  private readonly byKind = new Map<string, { count: number; examples: string[] }>();
  add(kind: string, detail: string, count = 1): void {
    let k = this.byKind.get(kind);
    if (!k) this.byKind.set(kind, (k = { count: 0, examples: [] }));
    k.count += count;
    if (k.examples.length < 3 && detail) k.examples.push(detail);
  }
  merge(entries: FailureEntry[]): void {
    for (const [kind, count, examples] of entries) {
      this.add(kind, examples[0] ?? "", count);
      for (const ex of examples.slice(1)) this.add(kind, ex, 0);
    }
  }
  entries(): FailureEntry[] {
    return [...this.byKind].map(([kind, k]) => [kind, k.count, k.examples]);
  }
  get count(): number {
    let n = 0;
    for (const k of this.byKind.values()) n += k.count;
    return n;
  }
  lines(): string[] {
    return [...this.byKind].map(([kind, k]) => `${kind} x${k.count}${k.examples.length ? `: ${k.examples.join(" | ")}` : ""}`);
  }
}
