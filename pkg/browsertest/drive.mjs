// Drives a page in headless Chromium by commands read from stdin, one JSON object per line, and answers each
// with one JSON line on stdout, for tests that act on a page (click, fill) and check what it shows.
//
//   node drive.mjs URL
//
// Commands: {"fill": [selector, text]}, {"select": [selector, value]}, {"click": selector},
// {"wait": "<JavaScript expression>"} (until it is true, within "timeout" ms, default 60000),
// {"eval": "<JavaScript expression>"} (answers {"value": ...}), {"screenshot": path} (the viewport; with
// "full": true the whole page), {"reload": true} (loads the page again, as the reload button does). Every answer is
// {"ok": true, ...} or {"error": "..."}; the first line, once the page has loaded, is {"ok": true}.
// CHROMIUM names the browser binary (default /usr/bin/chromium).
import { launch } from "./launch.mjs";
import { createInterface } from "node:readline";

const [url] = process.argv.slice(2);
if (!url) {
  console.error("usage: node drive.mjs URL");
  process.exit(2);
}
const browser = await launch();
const answer = (o) => console.log(JSON.stringify(o));
try {
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  page.on("pageerror", (err) => console.error("page error:", err.message));
  await page.goto(url);
  answer({ ok: true });
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim() === "") continue;
    const cmd = JSON.parse(line);
    try {
      if (cmd.fill) await page.fill(cmd.fill[0], cmd.fill[1]);
      else if (cmd.select) await page.selectOption(cmd.select[0], cmd.select[1]);
      else if (cmd.click) await page.click(cmd.click);
      else if (cmd.reload) await page.reload();
      else if (cmd.wait) await page.waitForFunction(cmd.wait, null, { timeout: cmd.timeout || 60000, polling: 50 });
      else if (cmd.screenshot) await page.screenshot({ path: cmd.screenshot, fullPage: Boolean(cmd.full) });
      else if (cmd.eval) {
        answer({ ok: true, value: await page.evaluate(cmd.eval) });
        continue;
      } else throw new Error("unknown command " + line);
      answer({ ok: true });
    } catch (err) {
      answer({ error: String(err.message || err) });
    }
  }
} finally {
  await browser.close();
}
