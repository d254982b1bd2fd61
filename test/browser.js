// Debian's Chromium for the page's browser tests, driven by playwright-core (which downloads
// nothing: it drives the one at /usr/bin/chromium, which .ci/run installs).
import fs from "node:fs";
import { chromium } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";

/** Why the browser tests skip, or false. CI installs it: there a missing browser is a failure. */
export const noChromium =
  fs.existsSync(CHROMIUM) || process.env.CI
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
