// Package clientjs holds ssegate.js, the JavaScript client of an ssegate gateway: an ES module published to
// npm as a package of its own (package.json, ssegate.d.ts, README.md here), which every gateway also serves at
// /ssegate.js (docs/gateway.md, "The browser client").
package clientjs

import _ "embed"

// Source is ssegate.js as the gateway serves it at /ssegate.js.
//
//go:embed ssegate.js
var Source []byte
