//go:build !unix

package sqltest

import (
	"os"
	"syscall"
)

// sysProcAttr returns nil: there is no process-group, parent-death or
// credential support on this platform, and as is always nil.
func sysProcAttr(*account) *syscall.SysProcAttr { return nil }

// Only Kill is supported on this platform; a nil signal makes Pause and
// Resume fail with errors.ErrUnsupported and Shutdown and Stop kill the
// server directly.
var sigInt, sigTerm, sigStop, sigCont os.Signal
