// Command-line numbers of the bench scripts.

/** The integer value of option --name, at least `min` (0 or 1); else a message and exit 2. */
export function intOption(name: string, v: string | undefined, min: 0 | 1 = 1): number {
  const n = Number(v);
  if (!/^\d+$/.test(v ?? "") || n < min) {
    console.error(`--${name} must be a ${min === 0 ? "non-negative" : "positive"} integer`);
    process.exit(2);
  }
  return n;
}
