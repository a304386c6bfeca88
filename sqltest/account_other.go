//go:build !unix

package sqltest

// An account is the system user a server runs as when it is not the test
// process's own user; on this platform servers always run as the test's
// own user, and the nil *account stands for it.
type account struct{}

// serverAccount returns nil: the test's own user.
func serverAccount() (*account, error) { return nil, nil }

// chown does nothing: servers run as the test's own user.
func (a *account) chown(string) error { return nil }
