// Package logtail reads the ends of server logs for the errors of the
// test harnesses (redistest, sqltest): how long a log is at some moment,
// and the last lines written to it since.
package logtail

import (
	"io"
	"os"
	"strings"
)

// Lines is how many lines Last keeps.
const Lines = 30

// Size returns the size of the file path, or 0 if it cannot be read. It
// marks how long a log was at some moment, so that a later From shows
// only what was written since.
func Size(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// From returns the contents of path from offset on (a MiB at most), or ""
// on error.
func From(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return ""
	}
	return string(b)
}

// Last returns the last Lines lines of text, or "(no output)" if it has
// none but blanks.
func Last(text string) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > Lines {
		lines = lines[len(lines)-Lines:]
	}
	out := strings.Join(lines, "\n")
	if strings.TrimSpace(out) == "" {
		return "(no output)"
	}
	return out
}
