import { expect, test } from "bun:test";
import { defaults } from "../config/schema.ts";
import { faviconResponse } from "./favicon.ts";
import { httpRoutes } from "./routes.ts";

test("/favicon.ico is an SVG image, cached, at the origin's root whatever the relay path", async () => {
  const config = defaults();
  config.network.path = "/nostr";
  const route = httpRoutes({ relay: { config } as any, version: "0", metrics: async () => "", statusJson: () => "{}" });
  const res = (await route(new Request("http://relay.example/favicon.ico"), () => "127.0.0.1"))!;
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("image/svg+xml");
  expect(res.headers.get("cache-control")).toBe("public, max-age=86400");
  expect(await res.text()).toMatch(/^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"[\s\S]*<\/svg>$/);
  const head = faviconResponse(new Request("http://relay.example/favicon.ico", { method: "HEAD" }));
  expect(head.status).toBe(200);
  expect(await head.text()).toBe("");
  expect(faviconResponse(new Request("http://relay.example/favicon.ico", { method: "POST" })).status).toBe(405);
});
