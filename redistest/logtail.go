package redistest

import "github.com/distlock/distlock/internal/logtail"

// logMark records how long the server's output files were at some moment,
// so that a later tail shows only what was written since.
type logMark struct{ stdio, log int64 }

func (s *Server) mark() logMark {
	return logMark{stdio: logtail.Size(s.stdioPath()), log: logtail.Size(s.logPath)}
}

// tail returns the last lines written to the server's stdout/stderr and log
// file since m.
func (s *Server) tail(m logMark) string {
	return logtail.Last(logtail.From(s.stdioPath(), m.stdio) + logtail.From(s.logPath, m.log))
}
