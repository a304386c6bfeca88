package harness

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// An Invocation is a run of sqlbench or etcdbench, run from bench/, and
// the markdown report it writes: the report opens with the command line,
// and the command ends it with a line about the machine, the load
// average at the start and how long it took.
type Invocation struct {
	Start time.Time
	Load0 string // the load average at the start (LoadAvg)
	md    strings.Builder
}

// NewInvocation starts the report of the command name, with its command
// line: "Command: `go run ./cmd/NAME ARGS` (from `bench/`)."
func NewInvocation(name string) *Invocation {
	inv := &Invocation{Start: time.Now(), Load0: LoadAvg()}
	inv.W("Command: `go run ./cmd/%s %s` (from `bench/`).\n\n", name, strings.Join(os.Args[1:], " "))
	return inv
}

// W writes to the report, as fmt.Printf does.
func (inv *Invocation) W(format string, args ...any) { fmt.Fprintf(&inv.md, format, args...) }

// Print prints the report and, if file is not "", writes it into file
// with splice (the command's Splice) and says so.
func (inv *Invocation) Print(file string, splice func(file, md string) error) error {
	fmt.Print(inv.md.String())
	if file == "" {
		return nil
	}
	if err := splice(file, inv.md.String()); err != nil {
		return err
	}
	Logf("report written into %s", file)
	return nil
}
