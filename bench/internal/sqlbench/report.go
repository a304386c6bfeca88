package sqlbench

import "github.com/distlock/distlock/bench/internal/harness"

// Splice writes md into file between "<!-- sqlbench:begin -->" and
// "<!-- sqlbench:end -->" (appending both markers and md if absent),
// keeping the rest of the file.
func Splice(file, md string) error { return harness.SpliceMarked(file, "sqlbench", md) }
