package sqltest

// TB is what the test forms of this package ([StartPostgres],
// [StartMariaDB]) use of a test: *testing.T, *testing.B, *testing.F and any
// testing.TB satisfy it. Taking it rather than testing.TB keeps the testing
// package out of programs that only use the other forms ([NewPostgres] and
// [NewMariaDB] in a demo or a benchmark command).
type TB interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatal(args ...any)
}

// stopAtCleanup is the end of the test forms of the New functions
// ([StartPostgres], ...): given what the New function returned, it calls
// tb.Fatal with err, or registers a cleanup function with tb that stops
// the server s and reports an error of its Stop.
func stopAtCleanup[S interface{ Stop() error }](tb TB, s S, err error) S {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Errorf("%v", err)
		}
	})
	return s
}
