// Sends the pre-signed events (or reads the good one back with `read`); prints each answer.
const { good, forged } = JSON.parse(await Bun.file("/root/events.json").text());
const ws = new WebSocket("ws://127.0.0.1:7447/");
const answers = [];
const read = process.argv[2] === "read";
ws.onopen = () => {
  if (read) ws.send(JSON.stringify(["REQ", "r", { ids: [good.id] }]));
  else for (const e of [good, forged]) ws.send(JSON.stringify(["EVENT", e]));
};
ws.onmessage = (m) => {
  const f = JSON.parse(String(m.data));
  if (f[0] === "AUTH") return;
  console.log(JSON.stringify(f).slice(0, 160));
  answers.push(f);
  if ((read && f[0] === "EOSE") || (!read && answers.filter((a) => a[0] === "OK").length === 2)) process.exit(0);
};
setTimeout(() => (console.log("timeout"), process.exit(2)), 15000);
