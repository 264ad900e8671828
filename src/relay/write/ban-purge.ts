// Issue 34: what a ban hid is deleted once [admin] ban_retention has passed since the ban. The
// ban's time is stored (the `hidden` rows), so a restart loses nothing; each pass does bounded
// work (admin/state.ts purgeDue) and the next comes when a row falls due, or in a second while an
// author's purge is under way. Every Postgres node runs it: a purge is idempotent, and its row
// leaving tells every node (admin_version).
import { log } from "../../log.ts";
import { nowSeconds } from "../../protocol/event.ts";
import type { RelayContext } from "../context.ts";

/** The longest wait between passes (a retention shortened by a reload). */
const IDLE_SECONDS = 60;

export function banPurger(ctx: RelayContext): { stop(): void } {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running = false;
  const schedule = (seconds: number) => {
    clearTimeout(timer);
    timer = setTimeout(pass, seconds * 1000);
    timer.unref();
  };
  const pass = async () => {
    if (ctx.closing || running) return;
    running = true;
    let next = IDLE_SECONDS;
    try {
      next = await ctx.admin.purgeDue(nowSeconds(), IDLE_SECONDS);
    } catch (err) {
      log.error("ban purge failed:", err);
    } finally {
      running = false;
    }
    if (!ctx.closing) schedule(next);
  };
  // A ban, an unban or another node's change: the next row due may be sooner (a pass under way
  // schedules the next itself, from the rows as they are when it ends).
  ctx.admin.onHiddenChange = () => running || schedule(0.05);
  schedule(1);
  return {
    stop: () => {
      clearTimeout(timer);
      ctx.admin.onHiddenChange = undefined;
    },
  };
}
