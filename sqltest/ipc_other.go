//go:build !linux

package sqltest

// removeShm does nothing on this platform: the System V shared memory
// segment of a killed postmaster stays until a postmaster is started again
// on the same data directory, or the machine reboots.
func removeShm(key, id int) error { return nil }
