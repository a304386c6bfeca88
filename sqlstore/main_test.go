package sqlstore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the tests if any goroutine is left running after them:
// a store's listener or poller, a pool's, a Client's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
