import { expect, test } from "bun:test";
import { decodeNpub, encodeNpub, pubkeyOf } from "./nip19.ts";

// NIP-19's own example.
const HEX = "7e7e9c42a91bfef19fa929e5fda1b72e0ebc1a4c1141673e2794234d86addf4e";
const NPUB = "npub10elfcs4fr0l0r8af98jlmgdh9c8tcxjvz9qkw038js35mp4dma8qzvjptg";

test("npub <-> hex, NIP-19's example", () => {
  expect(decodeNpub(NPUB)).toBe(HEX);
  expect(decodeNpub(NPUB.toUpperCase())).toBe(HEX);
  expect(encodeNpub(HEX)).toBe(NPUB);
  expect(pubkeyOf(` ${NPUB} `)).toBe(HEX);
  expect(pubkeyOf(HEX.toUpperCase())).toBe(HEX);
});

test("anything else is undefined", () => {
  const flipped = NPUB.slice(0, -1) + (NPUB.endsWith("g") ? "h" : "g");
  for (const bad of [
    flipped,
    "nsec1" + NPUB.slice(5),
    NPUB.slice(0, 20),
    "npub1",
    "Npub" + NPUB.slice(4),
    HEX.slice(1),
    "",
    "x".repeat(200),
  ])
    expect(pubkeyOf(bad)).toBeUndefined();
});
