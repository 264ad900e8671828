import { describe, expect, test } from "bun:test";
import { finalizeEvent, generateSecretKey } from "nostr-tools/pure";
import { checkHttpAuth, parseAuthorization, relayUrlForms } from "./nip98.ts";

const sk = generateSecretKey();
const now = 1_700_000_000;
const token = (tags: string[][], created_at = now, kind = 27235) => finalizeEvent({ kind, created_at, tags, content: "" }, sk);
const header = (e: object) => `Nostr ${Buffer.from(JSON.stringify(e)).toString("base64")}`;
const x = { method: "POST", urls: ["https://r.example/", "wss://r.example/"], now, windowSeconds: 60, payload: "ab".repeat(32) };
const good = [
  ["u", "https://r.example/"],
  ["method", "POST"],
  ["payload", "ab".repeat(32)],
];

describe("NIP-98", () => {
  test("a header round-trips to the event", () => {
    const e = token(good);
    const plain = JSON.parse(JSON.stringify(e));
    expect(parseAuthorization(header(e))).toEqual(plain);
    expect(parseAuthorization(`Nostr ${Buffer.from(JSON.stringify(e)).toString("base64url")}`)).toEqual(plain);
  });
  test("bad headers say why", () => {
    expect(parseAuthorization(null)).toContain("missing");
    expect(parseAuthorization("Bearer abc")).toContain("Nostr <base64");
    expect(parseAuthorization("Nostr !!!")).toContain("Nostr <base64");
    expect(parseAuthorization("Nostr aGVsbG8=")).toContain("not base64 of a JSON event");
    expect(parseAuthorization(header({ kind: 1 }))).toContain("Authorization event:");
  });
  test("each check refuses", () => {
    expect(checkHttpAuth(token(good), x)).toBeUndefined();
    expect(checkHttpAuth(token(good, now, 1), x)).toContain("kind 27235");
    expect(checkHttpAuth(token(good, now - 61), x)).toContain("created_at");
    expect(checkHttpAuth(token(good, now + 61), x)).toContain("created_at");
    expect(checkHttpAuth(token([["u", "https://other/"], ...good.slice(1)]), x)).toContain("u tag");
    expect(checkHttpAuth(token([good[0]!, ["method", "GET"], good[2]!]), x)).toContain("method");
    expect(checkHttpAuth(token(good.slice(0, 2)), x)).toContain("payload");
    expect(checkHttpAuth(token([...good.slice(0, 2), ["payload", "cd".repeat(32)]]), x)).toContain("payload");
    expect(checkHttpAuth(token([["u", "wss://r.example/"], ...good.slice(1)]), x)).toBeUndefined();
  });
  test("relay URL forms pair ws with http", () => {
    expect(relayUrlForms("wss://r.example/x")).toEqual(["wss://r.example/x", "https://r.example/x"]);
    expect(relayUrlForms("http://127.0.0.1:7447/")).toEqual(["http://127.0.0.1:7447/", "ws://127.0.0.1:7447/"]);
  });
});
