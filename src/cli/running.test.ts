import { expect, test } from "bun:test";
import { serveConfigArg } from "./running.ts";

test("serveConfigArg: the --config of a relay's command line (binary or bun script), none for the other commands", () => {
  expect(serveConfigArg(["/usr/local/bin/bunstr", "serve", "--config", "/etc/bunstr/config.toml"])).toBe("/etc/bunstr/config.toml");
  expect(serveConfigArg(["bunstr", "--port", "7447", "--config=relay.toml"])).toBe("relay.toml");
  expect(serveConfigArg(["/x/node_modules/bun/bin/bun.exe", "/repo/src/main.ts", "serve", "--config", "c.toml"])).toBe("c.toml");
  expect(serveConfigArg(["bun", "--watch", "src/main.ts", "--config", "c.toml"])).toBe("c.toml");
  expect(serveConfigArg(["bunstr", "export", "--config", "c.toml"])).toBeUndefined();
  expect(serveConfigArg(["bunstr", "admin", "add", "npub1x", "--config", "c.toml"])).toBeUndefined();
  expect(serveConfigArg(["bun", "other.ts", "--config", "c.toml"])).toBeUndefined();
  expect(serveConfigArg(["vim", "--config", "c.toml"])).toBeUndefined();
  expect(serveConfigArg(["bunstr", "serve"])).toBeUndefined();
});
