// Opens a page in headless Chromium and reports what its EventSource saw, for pages that keep their account in
// window.ssegate (opens, events, closed, ...), like the cross-origin test pages.
//
//   node page.mjs URL COUNT [TIMEOUT_MS]
//
// Prints "open" once the EventSource is connected, or "closed" if it failed for good first; then waits until
// the page has received COUNT events (or its EventSource is closed) and prints window.ssegate as one JSON line.
// CHROMIUM names the browser binary (default /usr/bin/chromium).
import { launch } from "./launch.mjs";

const [url, countArg, timeoutArg] = process.argv.slice(2);
const count = Number(countArg);
const timeout = Number(timeoutArg || 60000);
if (!url || !Number.isInteger(count) || count < 0) {
  console.error("usage: node page.mjs URL COUNT [TIMEOUT_MS]");
  process.exit(2);
}

const browser = await launch();
try {
  const page = await browser.newPage();
  page.on("pageerror", (err) => console.error("page error:", err.message));
  page.on("console", (msg) => console.error("page console:", msg.text()));
  await page.goto(url);
  await page.waitForFunction(() => window.ssegate && (window.ssegate.opens >= 1 || window.ssegate.closed), null, { timeout, polling: 50 });
  console.log(await page.evaluate(() => (window.ssegate.opens >= 1 ? "open" : "closed")));
  await page.waitForFunction((n) => window.ssegate.events.length >= n || window.ssegate.closed, count, { timeout, polling: 50 });
  console.log(JSON.stringify(await page.evaluate(() => window.ssegate)));
} finally {
  await browser.close();
}
