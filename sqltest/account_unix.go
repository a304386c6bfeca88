//go:build unix

package sqltest

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// An account is the system user a server runs as when it is not the test
// process's own user: initdb and postgres refuse to run as root, so a test
// run by root runs them as the postgres user. A nil *account means the
// test's own user, and its methods then do nothing.
type account struct {
	name     string
	uid, gid int
}

// postgresUser is the system user that PostgreSQL runs as when the test
// runs as root; Debian's postgresql package creates it.
const postgresUser = "postgres"

// serverAccount returns the account PostgreSQL must run as: nil (the test's
// own user) unless the test runs as root, and then the postgres user.
func serverAccount() (*account, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(postgresUser)
	if err != nil {
		return nil, fmt.Errorf("running as root, and PostgreSQL refuses to run as root: "+
			"need a %q user to run it as (Debian's postgresql package creates one), or run the tests as another user: %w",
			postgresUser, err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return nil, fmt.Errorf("user %s: uid %q: %w", postgresUser, u.Uid, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return nil, fmt.Errorf("user %s: gid %q: %w", postgresUser, u.Gid, err)
	}
	if uid == 0 {
		return nil, fmt.Errorf("user %s has uid 0: PostgreSQL refuses to run as root", postgresUser)
	}
	return &account{name: u.Username, uid: uid, gid: gid}, nil
}

// credential returns the credential a process started as a runs with, or
// nil for the test's own user. Supplementary groups are dropped.
func (a *account) credential() *syscall.Credential {
	if a == nil {
		return nil
	}
	return &syscall.Credential{Uid: uint32(a.uid), Gid: uint32(a.gid)}
}

// chown gives path to a; for the test's own user it does nothing.
func (a *account) chown(path string) error {
	if a == nil {
		return nil
	}
	return os.Lchown(path, a.uid, a.gid)
}
