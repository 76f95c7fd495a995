//go:build integration

package integration

// Enabled is true: this test binary was built with -tags integration and
// may run QEMU, the peer tools and the real fixtures.
const Enabled = true
