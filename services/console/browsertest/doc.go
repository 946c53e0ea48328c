// Package browsertest drives the console's web page in headless Chromium
// (Debian's /usr/bin/chromium, through chromedp) against the real stack:
// the console and every worker run as built binaries on a fresh database,
// virtual host and bucket. The tests are its only content.
package browsertest
