// Package testenv holds deps.sh, the one list of what the project's tests need on a machine, and the tests
// of that script. `make test` (and so CI) runs `deps.sh install test` first: it installs the missing Debian
// packages as root, or stops at once, before any test, naming the command that would install them.
package testenv
