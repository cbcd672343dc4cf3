// Opens a page in headless Chromium, lets it receive some events, reloads it, and reports what it saw before
// and after the reload, for pages that keep their account in window.ssegate (opens, events, closed, ...) and
// their stream's position in sessionStorage (the project's client module, /ssegate.js).
//
//   node reload.mjs URL BEFORE TOTAL [TIMEOUT_MS]
//
// Prints "open" once the page's stream is open (or "closed" if it failed for good first); once the page has
// BEFORE events it reloads it, waits until the page of the reload has TOTAL-BEFORE events more (or is closed)
// and prints {"before": window.ssegate before the reload, "after": window.ssegate after it} as one JSON line.
// CHROMIUM names the browser binary (default /usr/bin/chromium).
import { launch } from "./launch.mjs";

const [url, beforeArg, totalArg, timeoutArg] = process.argv.slice(2);
const before = Number(beforeArg);
const total = Number(totalArg);
const timeout = Number(timeoutArg || 60000);
if (!url || !Number.isInteger(before) || !Number.isInteger(total) || before < 0 || total < before) {
  console.error("usage: node reload.mjs URL BEFORE TOTAL [TIMEOUT_MS]");
  process.exit(2);
}

const browser = await launch();
try {
  const page = await browser.newPage();
  page.on("pageerror", (err) => console.error("page error:", err.message));
  page.on("console", (msg) => console.error("page console:", msg.text()));
  const account = async (n) => {
    await page.waitForFunction((n) => window.ssegate && (window.ssegate.events.length >= n || window.ssegate.closed), n, { timeout, polling: 50 });
    return page.evaluate(() => window.ssegate);
  };
  await page.goto(url);
  await page.waitForFunction(() => window.ssegate && (window.ssegate.opens >= 1 || window.ssegate.closed), null, { timeout, polling: 50 });
  console.log(await page.evaluate(() => (window.ssegate.opens >= 1 ? "open" : "closed")));
  const first = await account(before);
  await page.reload();
  const second = await account(total - first.events.length);
  console.log(JSON.stringify({ before: first, after: second }));
} finally {
  await browser.close();
}
