package sqltest

import (
	"io"
	"os"
	"strings"
)

// tailLines is how many lines of server output start errors include.
const tailLines = 30

// fileSize returns the size of the file path, or 0 if it cannot be
// read. It marks how long a server's log was at some moment, so that a
// later tail shows only what was written since.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// tail returns the last lines written to the file path from offset on.
func tail(path string, offset int64) string {
	lines := strings.Split(strings.TrimRight(readFrom(path, offset), "\n"), "\n")
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	out := strings.Join(lines, "\n")
	if strings.TrimSpace(out) == "" {
		return "(no output)"
	}
	return out
}

// readFrom returns the contents of path from offset on, or "" on error.
func readFrom(path string, offset int64) string {
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
