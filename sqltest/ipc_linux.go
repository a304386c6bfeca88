//go:build linux

package sqltest

import (
	"errors"

	"golang.org/x/sys/unix"
)

// removeShm removes the System V shared memory segment id, which a killed
// postmaster left behind, if it still has the key key and no process
// attached. PostgreSQL keeps a small segment besides its main shared
// memory, to tell whether processes of an old postmaster still run; the
// postmaster removes it on a clean shutdown, and a new postmaster on the
// same data directory removes a stale one, but a killed server that is
// never restarted would leave it until the machine reboots.
func removeShm(key, id int) error {
	var desc unix.SysvShmDesc
	if _, err := unix.SysvShmCtl(id, unix.IPC_STAT, &desc); err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EIDRM) {
			return nil // gone already
		}
		return err
	}
	if int(desc.Perm.Key) != key || desc.Nattch != 0 {
		return nil // not ours, or still in use
	}
	_, err := unix.SysvShmCtl(id, unix.IPC_RMID, nil)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EIDRM) {
		return nil
	}
	return err
}
