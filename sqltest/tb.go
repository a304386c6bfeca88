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
