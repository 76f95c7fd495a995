package main

import (
	"os"
	"testing"
)

// The tests run pagepipe in-process with no makedumpfile to hand over to,
// whatever the machine has installed: a test of the fallback gives its
// own.
func TestMain(m *testing.M) {
	sysFallback = &fallback{getenv: func(string) string { return "" }}
	os.Exit(m.Run())
}
