// Package auth verifies the JWTs that let clients read the gateway's topics, and reads the scope a token
// carries.
//
// A token comes from the Authorization header (Bearer), the access_token query parameter when that is allowed,
// or a cookie (Extractor). Verifier.Verify checks it with golang-jwt: the algorithm must be one of those
// configured ("none" never is), the signature must verify with a key of that algorithm's type (an RSA key is
// never used as an HMAC secret, whatever the token says), exp is required, nbf, iss and aud are checked with
// the configured leeway. Keys come from a PEM file, an HMAC secret file, a JWK Set file and a JWKS URL; key
// sets are read with MicahParks/jwkset and selected by kid with MicahParks/keyfunc. A refused token is an
// *Error whose Reason says why, in RFC 6750 terms (Code, Status, Challenge).
//
// Key rotation needs no restart: Run reads every file again and fetches the URL again every refresh interval,
// and swaps a source's keys in only when they parse (a failed read keeps the keys it had). A token naming a kid
// that no key set holds asks Run for a refresh at once, at most once per UnknownKeyRefreshGap, and waits for it
// a few seconds: a fresh rotation is seen by the first token signed with the new key, and forged kids cost at
// most one fetch per gap. Run does the fetching itself (rather than jwkset's own refresh goroutine) so that the
// refresh has an owner that stops and is joined with the gateway, and a request never blocks on a rate limiter.
//
// The scope claim (Scope) lists the topics a token allows and may force record keys and event types; package
// stream narrows a stream's parameters to it.
//
// Concurrency: a Verifier is safe for concurrent use once New returns; Verify may run on any number of
// goroutines while Run refreshes. Each source's keys are an immutable set behind an atomic pointer, so a
// verification never takes a lock on the keys; the only mutex guards the refresh round that waiting
// verifications are woken by, and is never held while fetching. Run must be called at most once.
package auth
