//go:build !unix

package sqltest

// holdPort holds nothing on this platform: the port of a killed server may
// be taken by another.
func holdPort(int) (release func()) { return func() {} }
