// Reading a SQLite write-ahead log as SQLite's recovery will (https://sqlite.org/fileformat2.html#walformat):
// frames are valid while their salts match the header and their cumulative checksum holds; the
// database state recovered is everything up to the last valid commit frame. Valid frames after it
// belong to a transaction that was being written (spilled or mid-commit) when the process died.
import { existsSync, readFileSync } from "node:fs";

export interface WalState {
  /** The -wal file exists. */
  exists: boolean;
  bytes: number;
  pageSize: number;
  /** Valid frames up to and including the last commit frame: what recovery replays. */
  committedFrames: number;
  /** Commit frames among them (transactions in the log). */
  commits: number;
  /** Valid frames after the last commit frame: a transaction in progress when the process stopped. */
  uncommittedFrames: number;
  /** Bytes after the last valid frame (older generations of the log, or a torn frame). */
  trailingBytes: number;
}

const WAL_HEADER = 32;
const FRAME_HEADER = 24;

export function readWal(path: string): WalState {
  const empty: WalState = { exists: false, bytes: 0, pageSize: 0, committedFrames: 0, commits: 0, uncommittedFrames: 0, trailingBytes: 0 };
  if (!existsSync(path)) return empty;
  const buf = readFileSync(path);
  if (buf.length < WAL_HEADER) return { ...empty, exists: true, bytes: buf.length, trailingBytes: buf.length };
  const magic = buf.readUInt32BE(0);
  if (magic !== 0x377f0682 && magic !== 0x377f0683) throw new Error(`${path}: not a WAL file (magic ${magic.toString(16)})`);
  // 0x377f0683: checksums over big-endian words; 0x377f0682: little-endian.
  const be = magic === 0x377f0683;
  const word = (off: number) => (be ? buf.readUInt32BE(off) : buf.readUInt32LE(off));
  const pageSize = buf.readUInt32BE(8) || 65536;
  const salt1 = buf.readUInt32BE(16);
  const salt2 = buf.readUInt32BE(20);
  let s0 = 0;
  let s1 = 0;
  const sum = (off: number, len: number) => {
    for (let i = off; i < off + len; i += 8) {
      s0 = (s0 + word(i) + s1) >>> 0;
      s1 = (s1 + word(i + 4) + s0) >>> 0;
    }
  };
  sum(0, 24);
  if (s0 !== buf.readUInt32BE(24) || s1 !== buf.readUInt32BE(28))
    return { ...empty, exists: true, bytes: buf.length, pageSize, trailingBytes: buf.length - WAL_HEADER };

  let valid = 0;
  let lastCommit = 0;
  let commits = 0;
  for (let off = WAL_HEADER; off + FRAME_HEADER + pageSize <= buf.length; off += FRAME_HEADER + pageSize) {
    if (buf.readUInt32BE(off + 8) !== salt1 || buf.readUInt32BE(off + 12) !== salt2) break;
    sum(off, 8);
    sum(off + FRAME_HEADER, pageSize);
    if (s0 !== buf.readUInt32BE(off + 16) || s1 !== buf.readUInt32BE(off + 20)) break;
    valid++;
    if (buf.readUInt32BE(off + 4) !== 0) (lastCommit = valid), commits++;
  }
  return {
    exists: true,
    bytes: buf.length,
    pageSize,
    committedFrames: lastCommit,
    commits,
    uncommittedFrames: valid - lastCommit,
    trailingBytes: buf.length - WAL_HEADER - valid * (FRAME_HEADER + pageSize),
  };
}
