// The one place the version is written down (the CLI's --version, the alerts' User-Agent, the
// config cache's key). test/core.test.js checks that it matches package.json.
export const VERSION = "0.1.0";
