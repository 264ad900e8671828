// The pages' files as the server imports them: `with { type: "text" }` makes each its text, and
// `bun build --compile` embeds it. TypeScript 7.0 types an import by its file name only, so these
// name the files (from 7.1 on, @types/bun types every `type: "text"` import as a string). *.html
// cannot be named here: Bun's types already call it an HTMLBundle; template.ts's text() checks it.
declare module "*.css" {
  const text: string;
  export default text;
}
