package redistest

import (
	"io"
	"os"
	"strings"
)

// tailLines is how many lines of server output start errors include.
const tailLines = 30

// logMark records how long the server's output files were at some moment,
// so that a later tail shows only what was written since.
type logMark struct{ stdio, log int64 }

func (s *Server) mark() logMark {
	return logMark{stdio: fileSize(s.stdioPath()), log: fileSize(s.logPath)}
}

// tail returns the last lines written to the server's stdout/stderr and log
// file since m.
func (s *Server) tail(m logMark) string {
	text := readFrom(s.stdioPath(), m.stdio) + readFrom(s.logPath, m.log)
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	out := strings.Join(lines, "\n")
	if strings.TrimSpace(out) == "" {
		return "(no output)"
	}
	return out
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
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
