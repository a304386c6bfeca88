//go:build !unix

package etcdtest

// holdPort holds nothing on this platform: the port of a stopped member may
// be taken by another.
func holdPort(int) (release func()) { return func() {} }
