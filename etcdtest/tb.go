package etcdtest

// TB is what the test forms of this package ([Start], [Dial], the Client
// methods) use of a test: *testing.T, *testing.B, *testing.F and any
// testing.TB satisfy it. Taking it rather than testing.TB keeps the testing
// package out of programs that only use the other forms ([NewCluster] in a
// demo or a benchmark command).
type TB interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	TempDir() string
}
