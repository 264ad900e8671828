// Fills a page's {{slot}}s (pages/*.html). The values go in as given, so the caller escapes what
// needs it; text a value brings is not scanned for slots again (a relay named "{{name}}" stays so).

type Slots<K extends string> = Record<K, string>;

export function fill<K extends string>(template: string, slots: Slots<K>): string {
  return template.replace(/\{\{(\w+)\}\}/g, (_, key: string) => {
    const value = (slots as Record<string, string | undefined>)[key];
    if (value === undefined) throw new Error(`the page has a slot {{${key}}} that nothing fills`);
    return value;
  });
}

/**
 * A `with { type: "text" }` import as the string it is. TypeScript 7.0 types an import by its file
 * name only and Bun's types call every *.html an HTMLBundle; this checks rather than casts.
 */
export function text(imported: unknown): string {
  if (typeof imported !== "string") throw new Error('a page file was not imported as text (with { type: "text" })');
  return imported;
}
