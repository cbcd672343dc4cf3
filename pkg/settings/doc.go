// Package settings loads a service's configuration from flags, environment variables and an optional YAML
// file, in that order of precedence, with one description of each setting for all three.
//
// A Setting names a flag (--ring-bytes), the environment variables that may set it (SSEGATE_RING_BYTES) and
// is also the key of the YAML file given with --config. Values are parsed by flag.Value implementations
// (String, List, Duration, Bytes, Map, ...), so the three sources accept exactly the same text; a YAML list is
// a comma list, and a YAML map, for a Map setting only, a comma list of key=value pairs. Settings that write one field (a password and its -file form) share a Group: the strongest
// source that sets any of them wins for all of them. A secret can be a NoFlag setting (environment and file
// only), so that it never shows in process lists; FlagOnly is the other way round.
//
// Concurrency: Load runs on the caller's goroutine; the values it returns are plain data.
package settings
