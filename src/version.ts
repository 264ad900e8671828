// The version, baked in by build.ts (`define`); from package.json when running from source.
import pkg from "../package.json" with { type: "json" };

declare const BUNSTR_VERSION: string | undefined;

export const VERSION: string = typeof BUNSTR_VERSION === "string" ? BUNSTR_VERSION : pkg.version;
