package redistest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// EnvServer is the environment variable that, when set to a non-empty value,
// names the redis-server binary to use instead of looking it up in PATH.
const EnvServer = "DISTLOCK_REDIS_SERVER"

// ErrNotFound is returned (possibly wrapped) by [Binary], [NewServer] and
// [Start] when no usable redis-server binary can be found. Its message tells
// the user how to install one.
var ErrNotFound = errors.New("redis-server not found: install it with `sudo apt-get install -y redis-server` (Debian/Ubuntu) or set " + EnvServer)

// Binary returns the path of the redis-server binary: the value of
// $DISTLOCK_REDIS_SERVER if it is set and non-empty, otherwise the result of
// looking up "redis-server" in PATH. In both cases the file must exist and be
// executable. If it is not, the error satisfies errors.Is(err, ErrNotFound)
// and its message explains how to install redis-server.
func Binary() (string, error) {
	if v := os.Getenv(EnvServer); v != "" {
		path, err := exec.LookPath(v)
		if err != nil {
			return "", fmt.Errorf("%w (%s=%q: %v)", ErrNotFound, EnvServer, v, err)
		}
		return path, nil
	}
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return "", ErrNotFound
	}
	return path, nil
}
