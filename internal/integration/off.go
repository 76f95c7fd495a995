//go:build !integration

package integration

// Enabled is false: this test binary is the hermetic one (plain
// `go test`), and Require stops any test that would leave the checkout.
const Enabled = false
