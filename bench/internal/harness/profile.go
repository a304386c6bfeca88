package harness

import (
	"os"
	"runtime/pprof"
)

// StartCPUProfile starts profiling this process's CPU into the file path
// and returns the function that stops it and closes the file. An empty
// path profiles nothing (stop does nothing).
func StartCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
