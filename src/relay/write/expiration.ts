// NIP-40 expiration: expired events are hidden from every read as they expire; a timer reclaims
// their space in the store now and then.
import { log } from "../../log.ts";
import { nowSeconds } from "../../protocol/event.ts";
import type { RelayContext } from "../context.ts";

/** NIP-40: expired events are already hidden from every read; this reclaims their space, every expiration_sweep_seconds. */
export function expirationSweeper(ctx: RelayContext): { reconfigure(): void; stop(): void } {
  const { config } = ctx;
  const sweep = () => {
    if (!config.nips.nip40 || ctx.closing) return;
    Promise.resolve()
      .then(() => ctx.store.sweepExpired(nowSeconds()))
      .catch((err) => log.error("expiration sweep failed:", err));
  };
  let seconds = config.options.expiration_sweep_seconds;
  let timer = setInterval(sweep, seconds * 1000);
  timer.unref();
  return {
    reconfigure() {
      if (config.options.expiration_sweep_seconds === seconds) return;
      clearInterval(timer);
      seconds = config.options.expiration_sweep_seconds;
      timer = setInterval(sweep, seconds * 1000);
      timer.unref();
    },
    stop: () => clearInterval(timer),
  };
}
