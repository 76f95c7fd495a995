// Package integration says whether the test binary was built with the
// integration build tag, and stops a test that reaches outside the
// checkout when it was not.
//
// Plain `go test ./...` is hermetic: it needs no root, QEMU, peer tool
// (makedumpfile, crash, drgn, libkdumpfile), Debian package, network or
// real fixture. Tests that need one of those live in files built only
// with `-tags integration`, which `make test` sets. The helpers that reach
// them (internal/fixture, internal/judge, internal/realsample) call
// Require first, so a test left untagged by mistake fails in the plain
// pass with one line naming what it needs, instead of failing somewhere
// deep in a peer's output or, worse, passing on whatever the host has.
package integration

import "testing"

// Require fails tb at once, with one line naming what, unless the test
// binary was built with the integration tag.
func Require(tb testing.TB, what string) {
	tb.Helper()
	if !Enabled {
		tb.Fatalf("needs -tags integration: %s", what)
	}
}
