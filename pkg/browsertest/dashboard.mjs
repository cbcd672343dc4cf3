// Opens the gateway's dashboard in headless Chromium and reports what the page's EventSource saw.
//
//   node dashboard.mjs URL COUNT [TIMEOUT_MS]
//
// Prints "open" on a line of its own once the EventSource is connected, then waits until the page has
// received COUNT events and prints window.ssegate (opens, events, lastEventId) and the text of the page's
// data cells (shown) as one JSON line.
// CHROMIUM names the browser binary (default /usr/bin/chromium); SCREENSHOT, if set, is where a PNG of
// the page is written at the end.
import { launch } from "./launch.mjs";

const [url, countArg, timeoutArg] = process.argv.slice(2);
const count = Number(countArg);
const timeout = Number(timeoutArg || 60000);
if (!url || !Number.isInteger(count) || count < 0) {
  console.error("usage: node dashboard.mjs URL COUNT [TIMEOUT_MS]");
  process.exit(2);
}

const browser = await launch();
try {
  const page = await browser.newPage();
  page.on("pageerror", (err) => console.error("page error:", err.message));
  await page.goto(url);
  await page.waitForFunction(() => window.ssegate && window.ssegate.opens >= 1, null, { timeout, polling: 50 });
  console.log("open");
  await page.waitForFunction((n) => window.ssegate.events.length >= n, count, { timeout, polling: 50 });
  if (process.env.SCREENSHOT) {
    await page.screenshot({ path: process.env.SCREENSHOT });
  }
  // What the page saw, and the text of its event table's data cells (newest first).
  console.log(JSON.stringify(await page.evaluate(() => ({
    ...window.ssegate,
    shown: Array.from(document.querySelectorAll("#events td.data"), (td) => td.textContent),
  }))));
} finally {
  await browser.close();
}
