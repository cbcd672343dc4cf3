// Opens a page in headless Chromium and reports what its stream saw, for pages that keep their account in
// window.ssegate (opens, events, closed, ...), like the cross-origin test pages and the client module's.
//
//   node page.mjs URL COUNT [TIMEOUT_MS [RELOAD_AT]]
//
// Prints "open" once the stream is connected, or "closed" if it failed for good first; then waits until the
// page has received COUNT events (or its stream is closed) and prints window.ssegate as one JSON line. With
// RELOAD_AT, the page is reloaded once it has RELOAD_AT events, and the line is {"before": window.ssegate
// before the reload, "after": window.ssegate of the reloaded page once it has COUNT events}: for pages that
// keep their position and their account of events across a reload (records that arrive between "before" and
// the reload are in the account after it, not in "before"). CHROMIUM names the browser binary (default
// /usr/bin/chromium).
import { launch } from "./launch.mjs";

const [url, countArg, timeoutArg, reloadArg] = process.argv.slice(2);
const count = Number(countArg);
const timeout = Number(timeoutArg || 60000);
const reloadAt = reloadArg === undefined ? null : Number(reloadArg);
if (!url || !Number.isInteger(count) || count < 0 || (reloadAt !== null && !(Number.isInteger(reloadAt) && reloadAt <= count))) {
  console.error("usage: node page.mjs URL COUNT [TIMEOUT_MS [RELOAD_AT]]");
  process.exit(2);
}

const browser = await launch();
try {
  const page = await browser.newPage();
  page.on("pageerror", (err) => console.error("page error:", err.message));
  page.on("console", (msg) => console.error("page console:", msg.text()));
  // account waits until the page has n events (or its stream is closed) and returns window.ssegate.
  const account = async (n) => {
    await page.waitForFunction((n) => window.ssegate && (window.ssegate.events.length >= n || window.ssegate.closed), n, { timeout, polling: 50 });
    return page.evaluate(() => window.ssegate);
  };
  await page.goto(url);
  await page.waitForFunction(() => window.ssegate && (window.ssegate.opens >= 1 || window.ssegate.closed), null, { timeout, polling: 50 });
  console.log(await page.evaluate(() => (window.ssegate.opens >= 1 ? "open" : "closed")));
  if (reloadAt === null) {
    console.log(JSON.stringify(await account(count)));
  } else {
    const before = await account(reloadAt);
    await page.reload();
    const after = await account(count);
    console.log(JSON.stringify({ before, after }));
  }
} finally {
  await browser.close();
}
