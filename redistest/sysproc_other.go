//go:build !unix

package redistest

import (
	"os"
	"syscall"
)

// sysProcAttr returns nil: there is no process-group or parent-death support
// on this platform.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// Only Kill is supported on this platform; a nil signal makes Pause and
// Resume fail with errors.ErrUnsupported and Stop kill the server directly.
var sigTerm, sigStop, sigCont os.Signal
