// @ts-check
// The status page's script: the Copy button puts the relay's websocket URL on the clipboard.
document
  .getElementById("copy")
  ?.addEventListener("click", () => navigator.clipboard.writeText(document.getElementById("url")?.textContent ?? ""));
