// Worker script URLs, resolved from this file at the root of src/. From source that is the
// file next to it; in the compiled binary every module shares the root's import.meta.url and
// build.ts embeds the workers under the same relative paths, so one spelling works for both.
export const workerUrl = (pathFromSrc: string): string => new URL(pathFromSrc, import.meta.url).href;
