// NIP-77: our relay side of negentropy against the client side of nostr-tools (a real, separately
// written implementation), at the pure level: hex messages in a loop, no websocket.
import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { nip77 } from "nostr-tools";
import { NegentropyError, NegentropyServer, NegentropyStorage, type NegentropyItem } from "./nip77.ts";
import { prng } from "../../bench/lib/stats.ts";

const { Negentropy, NegentropyStorageVector } = nip77;

const randomId = (rnd: () => number): string => {
  let s = "";
  for (let i = 0; i < 8; i++)
    s += Math.floor(rnd() * 0x100000000)
      .toString(16)
      .padStart(8, "0");
  return s;
};

interface Scenario {
  client: NegentropyItem[];
  server: NegentropyItem[];
  /** ids only the client has (it should report them as `have`) */
  have: string[];
  /** ids only the server has (the client should report them as `need`) */
  need: string[];
}

function scenario(
  seed: number,
  shared: number,
  clientOnly: number,
  serverOnly: number,
  timestamp?: (rnd: () => number) => number,
): Scenario {
  const rnd = prng(seed);
  const ts = timestamp ?? ((r) => 1_600_000_000 + Math.floor(r() * 100_000_000));
  const make = (n: number) => Array.from({ length: n }, () => ({ timestamp: ts(rnd), id: randomId(rnd) }));
  const both = make(shared);
  const c = make(clientOnly);
  const s = make(serverOnly);
  return { client: [...both, ...c], server: [...s, ...both], have: c.map((i) => i.id), need: s.map((i) => i.id) };
}

interface SyncResult {
  have: string[];
  need: string[];
  replies: string[];
  /** CPU time of this thread inside server.reconcile: the work done, which a loaded machine does not inflate as it does wall time. */
  serverMs: number;
}

/** Milliseconds of this thread's CPU time since `since` (a process.threadCpuUsage() reading). */
const cpuMsSince = (since: NodeJS.CpuUsage): number => {
  const d = process.threadCpuUsage(since);
  return (d.user + d.system) / 1000;
};

/** Runs nostr-tools' initiator against our server until the initiator has nothing left to ask. */
function sync(sc: Scenario, serverLimit = 0, clientLimit = 1e9): SyncResult {
  const clientStorage = new NegentropyStorageVector();
  for (const it of sc.client) clientStorage.insert(it.timestamp, it.id);
  clientStorage.seal();
  const client = new Negentropy(clientStorage, clientLimit);
  const server = new NegentropyServer(NegentropyStorage.from(sc.server), serverLimit);
  const have: string[] = [];
  const need: string[] = [];
  const replies: string[] = [];
  let serverMs = 0;
  let query: string | null = client.initiate();
  while (query !== null) {
    if (replies.length >= 1000) throw new Error("no convergence after 1000 round trips");
    const t0 = process.threadCpuUsage();
    const reply = server.reconcile(query);
    serverMs += cpuMsSince(t0);
    replies.push(reply);
    query = client.reconcile(
      reply,
      (id) => have.push(id),
      (id) => need.push(id),
    );
  }
  return { have, need, replies, serverMs };
}

/**
 * The client learned exactly the right ids. A reply cut short by a frame size limit ends with
 * one fingerprint up to infinity (the reference's scheme), which can reopen ranges the client
 * had already settled, so it may report some ids twice; without limits each id comes once.
 */
function expectReconciled(sc: Scenario, r: SyncResult, frameSizeLimit = 0, exactlyOnce = frameSizeLimit === 0): void {
  if (exactlyOnce) {
    expect(r.have.length).toBe(new Set(r.have).size);
    expect(r.need.length).toBe(new Set(r.need).size);
  }
  expect([...new Set(r.have)].sort()).toEqual([...sc.have].sort());
  expect([...new Set(r.need)].sort()).toEqual([...sc.need].sort());
  if (frameSizeLimit) for (const reply of r.replies) expect(reply.length / 2).toBeLessThanOrEqual(frameSizeLimit);
}

const SAME_TS = () => 1_700_000_000;
const TEN_TS = (r: () => number) => 1_700_000_000 + Math.floor(r() * 10);
const ZERO_TS = (r: () => number) => Math.floor(r() * 3);

const cases: [string, () => Scenario][] = [
  ["overlapping", () => scenario(1, 2000, 150, 120)],
  ["disjoint", () => scenario(2, 0, 500, 700)],
  ["client empty", () => scenario(3, 0, 0, 1000)],
  ["server empty", () => scenario(4, 0, 1000, 0)],
  ["both empty", () => scenario(5, 0, 0, 0)],
  ["one shared item", () => scenario(6, 1, 0, 0)],
  ["one item each, different", () => scenario(7, 0, 1, 1)],
  ["one item, server only", () => scenario(8, 0, 0, 1)],
  ["one item, client only", () => scenario(9, 0, 1, 0)],
  ["all timestamps equal", () => scenario(10, 3000, 100, 100, SAME_TS)],
  ["ten distinct timestamps", () => scenario(11, 3000, 80, 90, TEN_TS)],
  ["timestamps near zero", () => scenario(12, 500, 40, 40, ZERO_TS)],
  ["many differences", () => scenario(13, 1000, 900, 1100)],
];

describe("fingerprints", () => {
  test("agree with a BigInt computation of the spec and with nostr-tools, for every prefix", () => {
    const sc = scenario(20, 300, 0, 0, TEN_TS);
    const ours = NegentropyStorage.from(sc.server);
    const theirs = new NegentropyStorageVector();
    for (const it of sc.server) theirs.insert(it.timestamp, it.id);
    theirs.seal();
    const sorted = [...sc.server].sort((a, b) => a.timestamp - b.timestamp || (a.id < b.id ? -1 : 1));
    const littleEndian = (hex: string) => BigInt("0x" + (hex.match(/../g) ?? []).reverse().join(""));
    const spec = (begin: number, end: number) => {
      let sum = 0n;
      for (const it of sorted.slice(begin, end)) sum = (sum + littleEndian(it.id)) % (1n << 256n);
      const sumHex = sum.toString(16).padStart(64, "0").match(/../g)!.reverse().join("");
      const count = end - begin; // < 128 or 128..16383 here: one or two varint digits
      const varint = count < 128 ? [count] : [0x80 | (count >> 7), count & 0x7f];
      const input = Buffer.concat([Buffer.from(sumHex, "hex"), Buffer.from(varint)]);
      return createHash("sha256").update(input).digest("hex").slice(0, 32);
    };
    // Every prefix also proves both sides sort the items the same way.
    for (let end = 0; end <= sorted.length; end++) {
      const fp = Buffer.from(ours.fingerprint(0, end)).toString("hex");
      expect(fp).toBe(Buffer.from(theirs.fingerprint(0, end)).toString("hex"));
      if (end % 50 === 0) expect(fp).toBe(spec(0, end));
    }
    const rnd = prng(21);
    for (let k = 0; k < 100; k++) {
      const a = Math.floor(rnd() * 301);
      const b = Math.floor(rnd() * 301);
      const [begin, end] = a <= b ? [a, b] : [b, a];
      expect(Buffer.from(ours.fingerprint(begin, end)).toString("hex")).toBe(spec(begin, end));
    }
  });

  test("sums that wrap around 2^256 still agree", () => {
    const items = ["ff", "fe", "80"].map((b, i) => ({ timestamp: i, id: b.repeat(32) }));
    const ours = NegentropyStorage.from(items);
    const theirs = new NegentropyStorageVector();
    for (const it of items) theirs.insert(it.timestamp, it.id);
    theirs.seal();
    for (let b = 0; b <= 3; b++)
      for (let e = b; e <= 3; e++) expect(Buffer.from(ours.fingerprint(b, e))).toEqual(Buffer.from(theirs.fingerprint(b, e)));
  });
});

describe("reconciliation with nostr-tools' client", () => {
  test("identical sets finish in one round trip with an empty reply", () => {
    const sc = scenario(30, 5000, 0, 0);
    const r = sync(sc);
    expect(r.replies).toEqual(["61"]);
    expectReconciled(sc, r);
  });

  test.each(cases)("%s, no frame size limit", (_, make) => {
    const sc = make();
    expectReconciled(sc, sync(sc));
  });

  test.each(cases)("%s, 4096-byte frames on both sides", (_, make) => {
    const sc = make();
    expectReconciled(sc, sync(sc, 4096, 4096), 4096);
  });

  test("50,000 items with a few hundred differences each way, quickly and in few round trips", () => {
    const sc = scenario(40, 50_000, 300, 250);
    const r = sync(sc);
    expectReconciled(sc, r);
    expect(r.replies.length).toBeLessThanOrEqual(4);
    expect(r.serverMs).toBeLessThan(1000);
  });

  test("10,000 items with frame limits: every reply fits and the sync still converges", () => {
    const sc = scenario(41, 10_000, 400, 400, TEN_TS);
    const r = sync(sc, 4096, 4096);
    expectReconciled(sc, r, 4096);
    expect(r.replies.length).toBeGreaterThan(2); // the limit really cut replies short
  });

  test("an empty client downloads 5,000 ids through 4096-byte frames", () => {
    const sc = scenario(42, 0, 0, 5000);
    const r = sync(sc, 4096);
    expectReconciled(sc, r, 4096);
    expect(r.replies.length).toBeGreaterThanOrEqual(Math.ceil((5000 * 32) / 4096));
  });

  test("random sets, sizes, timestamp spreads and frame limits", () => {
    const rnd = prng(50);
    const spreads = [SAME_TS, TEN_TS, undefined];
    for (let k = 0; k < 40; k++) {
      const sc = scenario(
        1000 + k,
        Math.floor(rnd() * 400),
        Math.floor(rnd() * 60),
        Math.floor(rnd() * 60),
        spreads[Math.floor(rnd() * spreads.length)],
      );
      const serverLimit = [0, 4096, 6000][Math.floor(rnd() * 3)]!;
      const clientLimit = [4096, 1e9][Math.floor(rnd() * 2)]!;
      expectReconciled(sc, sync(sc, serverLimit, clientLimit), serverLimit, serverLimit === 0 && clientLimit === 1e9);
    }
  });
});

// Hand-built messages, independent of nostr-tools. Items: A at t=10, B at t=20.
const A = "aa".repeat(32);
const B = "bb".repeat(32);
const tiny = () =>
  new NegentropyServer(
    NegentropyStorage.from([
      { timestamp: 20, id: B },
      { timestamp: 10, id: A },
    ]),
  );

describe("exact replies", () => {
  test("an id list over everything is answered with all our ids", () => {
    // bound(infinity) IdList(0 ids)
    expect(tiny().reconcile("61" + "0000" + "02" + "00")).toBe("61" + "0000" + "02" + "02" + A + B);
  });

  test("a pending skip is written before the next range that needs an answer", () => {
    // bound(t=15) Skip, bound(infinity) Fingerprint(zeros): [15, inf) holds only B, so one id comes back.
    const reply = tiny().reconcile("61" + "1000" + "00" + "0000" + "01" + "00".repeat(16));
    expect(reply).toBe("61" + "1000" + "00" + "0000" + "02" + "01" + B);
  });

  test("matching fingerprints are answered with nothing; equal bounds make an empty range", () => {
    const fp = Buffer.from(tiny().storage.fingerprint(0, 2)).toString("hex");
    expect(tiny().reconcile("61" + "0000" + "01" + fp)).toBe("61");
    // bound(t=10) IdList(0), bound(t=10) IdList(0): the second range is empty.
    expect(tiny().reconcile("61" + "0b00" + "0200" + "0100" + "0200")).toBe("61" + "0b00" + "0200" + "0100" + "0200");
  });
});

test("a reply cut short by the frame limit keeps the client's Skip and fingerprints from the cut", () => {
  // 200 items at t=1..200. Query: ids wanted for [0, 116), Skip [116, 136), a wrong fingerprint
  // for [136, inf). 115 ids nearly fill a 4096-byte frame, so the 16 buckets for the last range
  // do not fit: it must come back as one fingerprint over [136, inf), after an explicit Skip.
  const rnd = prng(70);
  const items = Array.from({ length: 200 }, (_, i) => ({ timestamp: i + 1, id: randomId(rnd) }));
  const storage = NegentropyStorage.from(items);
  const reply = new NegentropyServer(storage, 4096).reconcile(
    "61" + "7500" + "02" + "00" + "1500" + "00" + "0000" + "01" + "00".repeat(16),
  );
  const ids = items
    .slice(0, 115)
    .map((i) => i.id)
    .join("");
  const rest = Buffer.from(storage.fingerprint(135, 200)).toString("hex");
  expect(reply).toBe("61" + "7500" + "02" + "73" + ids + "1500" + "00" + "0000" + "01" + rest);
});

describe("protocol version", () => {
  test("an unsupported version gets a reply of just our version byte, as the spec says", () => {
    for (const msg of ["62", "60", "6f", "62" + "deadbeef", "6f" + "00"]) expect(tiny().reconcile(msg)).toBe("61");
    // and nostr-tools' client reads that reply as "nothing more to do" rather than failing.
    const storage = new NegentropyStorageVector();
    storage.seal();
    const client = new Negentropy(storage);
    client.initiate();
    expect(client.reconcile("61")).toBeNull();
  });

  test("a first byte outside 0x60..0x6f is not a negentropy message", () => {
    for (const msg of ["00", "5f", "70", "ff", "01" + "0000"]) expect(() => tiny().reconcile(msg)).toThrow(NegentropyError);
  });
});

const varint = (n: bigint): string => {
  const digits: number[] = [];
  do {
    digits.unshift(Number(n & 0x7fn));
    n >>= 7n;
  } while (n > 0n);
  return digits.map((d, i) => (i < digits.length - 1 ? d | 0x80 : d).toString(16).padStart(2, "0")).join("");
};

describe("malformed messages throw NegentropyError, quickly", () => {
  const malformed: [string, string][] = [
    ["empty", ""],
    ["odd hex length", "610"],
    ["not hex", "61zz"],
    ["truncated timestamp varint", "61" + "80"],
    ["missing prefix length", "61" + "01"],
    ["prefix longer than an id", "61" + "01" + "21" + "00".repeat(33) + "00"],
    ["truncated prefix", "61" + "01" + "02" + "05"],
    ["missing mode", "61" + "0100"],
    ["unknown mode", "61" + "0100" + "03"],
    ["truncated fingerprint", "61" + "0000" + "01" + "00".repeat(15)],
    ["id list shorter than its count", "61" + "0000" + "02" + "02" + "00".repeat(32)],
    ["truncated id", "61" + "0000" + "02" + "01" + "00".repeat(31)],
    ["count of 2^50 ids", "61" + "0000" + "02" + varint(1n << 50n)],
    ["count beyond 2^64", "61" + "0000" + "02" + "ff".repeat(12) + "7f"],
    ["varint beyond 2^53", "61" + varint(1n << 60n) + "00" + "00"],
    ["timestamps summing past 2^53", "61" + varint((1n << 52n) + 2n) + "0000" + varint((1n << 52n) + 2n) + "0000"],
    ["bounds out of order", "61" + "0b" + "01ff" + "00" + "01" + "0100" + "00"],
    ["id prefix lower at an equal timestamp", "61" + "0b" + "0201ff" + "00" + "01" + "0201fe" + "00"],
    ["range after the infinity bound", "61" + "0000" + "00" + "0000" + "00"],
    ["trailing garbage after the infinity bound", "61" + "0000" + "00" + "05"],
    ["trailing garbage after a range", "61" + "0200" + "00" + "7f"],
    ["half a megabyte of continuation bytes", "61" + "80".repeat(500_000)],
  ];
  test.each(malformed)("%s", (_, hex) => {
    const t0 = process.threadCpuUsage();
    expect(() => tiny().reconcile(hex)).toThrow(NegentropyError);
    expect(cpuMsSince(t0)).toBeLessThan(250); // CPU time: the work, not the machine's load
  });

  test("mutated client messages either get a reply or a NegentropyError, never anything else", () => {
    const rnd = prng(60);
    const sc = scenario(61, 3000, 200, 200, TEN_TS);
    const limits = [0, 4096];
    const servers = limits.map((l) => new NegentropyServer(NegentropyStorage.from(sc.server), l));
    // Real messages from several points of a sync, as seeds for mutation.
    const seeds: string[] = [];
    const cs = new NegentropyStorageVector();
    for (const it of sc.client) cs.insert(it.timestamp, it.id);
    cs.seal();
    const client = new Negentropy(cs, 1e9);
    let q: string | null = client.initiate();
    while (q !== null) {
      seeds.push(q);
      q = client.reconcile(servers[0]!.reconcile(q));
    }
    let replies = 0;
    let errors = 0;
    for (let k = 0; k < 1500; k++) {
      const bytes = [...Buffer.from(seeds[k % seeds.length]!, "hex")];
      const edits = 1 + Math.floor(rnd() * 4);
      for (let e = 0; e < edits; e++) {
        const at = 1 + Math.floor(rnd() * Math.max(1, bytes.length - 1));
        const kind = Math.floor(rnd() * 4);
        if (kind === 0)
          bytes.length = at; // truncate
        else if (kind === 1)
          bytes[at] = Math.floor(rnd() * 256); // overwrite
        else if (kind === 2)
          bytes.splice(at, 0, Math.floor(rnd() * 256)); // insert
        else bytes.splice(at, 1 + Math.floor(rnd() * 40)); // delete a run
      }
      const server = servers[k % servers.length]!;
      try {
        const reply = server.reconcile(Buffer.from(bytes).toString("hex"));
        expect(reply.startsWith("61")).toBe(true);
        if (server.frameSizeLimit) expect(reply.length / 2).toBeLessThanOrEqual(server.frameSizeLimit);
        replies++;
      } catch (err) {
        if (!(err instanceof NegentropyError)) throw err;
        errors++;
      }
    }
    // Both outcomes occur, so the mutations reach past the parser's first checks.
    expect(replies).toBeGreaterThan(50);
    expect(errors).toBeGreaterThan(50);
    // 1,500 reconciliations: 3.7 s alone at load 6, past 30 s in the whole suite beside a CPU hog
    // (load 10). "Quickly" is each malformed message's CPU time, checked above; this is the total.
  }, 120_000);
});

describe("storage and server misuse", () => {
  const id = "ab".repeat(32);
  const cases: [string, () => unknown][] = [
    ["uppercase id", () => new NegentropyStorage().insert(1, id.toUpperCase())],
    ["short id", () => new NegentropyStorage().insert(1, "ab")],
    ["negative timestamp", () => new NegentropyStorage().insert(-1, id)],
    ["fractional timestamp", () => new NegentropyStorage().insert(1.5, id)],
    ["timestamp past 2^53", () => new NegentropyStorage().insert(2 ** 60, id)],
    [
      "duplicate item",
      () =>
        NegentropyStorage.from([
          { timestamp: 1, id },
          { timestamp: 1, id },
        ]),
    ],
    ["insert after seal", () => new NegentropyStorage().seal().insert(1, id)],
    ["seal twice", () => new NegentropyStorage().seal().seal()],
    ["unsealed storage", () => new NegentropyServer(new NegentropyStorage())],
    ["frame limit below 4096", () => new NegentropyServer(new NegentropyStorage().seal(), 100)],
    ["negative frame limit", () => new NegentropyServer(new NegentropyStorage().seal(), -1)],
    ["fingerprint of a bad range", () => new NegentropyStorage().seal().fingerprint(0, 1)],
  ];
  test.each(cases)("%s", (_, f) => expect(f).toThrow(NegentropyError));

  test("the same id at two timestamps is two items, as the protocol sees it", () => {
    const s = NegentropyStorage.from([
      { timestamp: 1, id },
      { timestamp: 2, id },
    ]);
    expect(s.size).toBe(2);
  });
});
