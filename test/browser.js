// Debian's Chromium for the page's browser tests, driven by playwright-core (which downloads
// nothing: it drives the one at /usr/bin/chromium, which .ci/run installs).
import fs from "node:fs";
import { chromium } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";

/** What the browser tests lack, or false: for `needs` (test/needs.js); CI installs it. */
export const chromiumMissing = fs.existsSync(CHROMIUM)
  ? false
  : `${CHROMIUM} is not installed (apt-get install chromium)`;

/** One headless browser with the flags the issue names. */
export function launchChromium() {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}
