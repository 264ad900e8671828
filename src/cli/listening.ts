// What the start-up line says about where the relay serves: the URLs a client can use on this
// machine's addresses (0.0.0.0 and :: are not addresses one can connect to), IPv6 in brackets,
// and the public URL when [info] relay_url is set. Pure: the interfaces come from the caller
// (os.networkInterfaces()).

/** The part of os.NetworkInterfaceInfo this reads. */
interface InterfaceAddress {
  readonly address: string;
  readonly family: "IPv4" | "IPv6" | number;
  readonly internal: boolean;
}

export interface ListeningInput {
  /** [network] host as configured. */
  readonly host: string;
  /** The port the server got (not 0). */
  readonly port: number;
  /** [network] path. */
  readonly path: string;
  /** [info] relay_url ("" when not configured). */
  readonly relayUrl: string;
  /** os.networkInterfaces() */
  readonly interfaces: Readonly<Record<string, readonly InterfaceAddress[] | undefined>>;
}

/** ws://host:port/path, an IPv6 literal in brackets. */
function wsUrl(host: string, port: number, path: string): string {
  const h = host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
  return `ws://${h}:${port}${path}`;
}

const isV6 = (a: InterfaceAddress) => a.family === "IPv6" || a.family === 6;

/** fe80::/10 needs a zone (%eth0) that a ws:// URL cannot carry. */
const linkLocal = (address: string) => /^fe[89ab]/i.test(address);

/** Loopback first (what works on this machine), then the others in interface order, no duplicates. */
function addressesOf(input: ListeningInput, v6: boolean): string[] {
  const all = Object.values(input.interfaces).flatMap((list) => list ?? []);
  const wanted = all.filter((a) => (v6 || !isV6(a)) && !(isV6(a) && linkLocal(a.address)));
  const ordered = [...wanted.filter((a) => a.internal), ...wanted.filter((a) => !a.internal)];
  return [...new Set(ordered.map((a) => a.address))];
}

/**
 * "ws://127.0.0.1:7447/ and ws://203.0.113.5:7447/ (0.0.0.0 = all IPv4 addresses of this machine;
 * public URL wss://relay.example.com/)": the first URL is always one a client on this machine can
 * connect to (tools read it from the line).
 */
export function listeningOn(input: ListeningInput): string {
  const { host, port, path } = input;
  const notes: string[] = [];
  let urls: string[];
  if (host === "0.0.0.0" || host === "::" || host === "") {
    const v6 = host === "::";
    const found = addressesOf(input, v6);
    const loopback = v6 ? ["127.0.0.1", "::1"] : ["127.0.0.1"];
    const addresses = found.length > 0 ? found : loopback;
    urls = addresses.map((a) => wsUrl(a, port, path));
    notes.push(v6 ? ":: = all addresses of this machine, IPv4 and IPv6" : "0.0.0.0 = all IPv4 addresses of this machine");
  } else urls = [wsUrl(host, port, path)];
  if (input.relayUrl !== "") notes.push(`public URL ${input.relayUrl}`);
  // The first URL is followed by a space, never a comma, for tools that read it with /listening on (\S+)/.
  const [first, ...rest] = urls;
  return `${first}${rest.length > 0 ? ` and ${rest.join(", ")}` : ""}${notes.length > 0 ? ` (${notes.join("; ")})` : ""}`;
}
