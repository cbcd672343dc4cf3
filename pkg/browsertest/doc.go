// Package browsertest holds the page driver of the browser tests: Node scripts (drive.mjs, page.mjs,
// launch.mjs, dashboard.mjs, streams.mjs) that drive Debian's Chromium through playwright-core, one JSON command
// a line.
// `make test` installs their npm packages (package.json, package-lock.json) here; the gateway's browser
// tests (services/gateway/internal/app, browser_*_test.go) run them under node.
//
// The JavaScript client's Node tests use its npm packages too: eventsource and ws (clientjs.mjs, which
// services/e2e's TestNodeClient runs), and typescript (pkg/clientjs's TestDeclarations); Node returns the
// binary and the packages' folder, skipping a test that cannot have them.
//
// Its Go API runs the AsyncAPI project's own parser on a document (ParseAsyncAPI, asyncapi.mjs), for the tests
// of the gateway's AsyncAPI document.
package browsertest
