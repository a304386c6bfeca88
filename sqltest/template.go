package sqltest

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// A template is a server's freshly initialized data directory, held in
// memory: made once per test binary (initdb and mariadb-install-db take
// a second or two) and written out for each server, in tens of
// milliseconds. Holding it in memory rather than on disk leaves nothing
// behind when the test binary exits, however it exits.
type template struct {
	entries []templateEntry
	bytes   int64 // data held, for the record
}

type templateEntry struct {
	rel  string // slash-separated path below the directory; "" is the directory
	mode fs.FileMode
	data []byte // for files: the contents without their trailing zero bytes
	size int64  // for files: the full size
}

// readTemplate reads the directory dir, which holds only directories and
// regular files. Files are stored without their trailing zeros, which
// make up most of a fresh data directory (PostgreSQL's first WAL segment,
// InnoDB's redo log), and written back as sparse files of the same size.
func readTemplate(dir string) (*template, error) {
	t := &template{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if rel == "." {
			rel = ""
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := templateEntry{rel: filepath.ToSlash(rel), mode: info.Mode()}
		switch {
		case info.IsDir():
		case info.Mode().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			e.size = int64(len(b))
			e.data = bytes.Clone(bytes.TrimRight(b, "\x00"))
			t.bytes += int64(len(e.data))
		default:
			return fmt.Errorf("%s: not a regular file or directory (%v)", path, info.Mode().Type())
		}
		t.entries = append(t.entries, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read template %s: %w", dir, err)
	}
	return t, nil
}

// write recreates the directory at dir, which must not exist, with every
// file and directory owned by as.
func (t *template) write(dir string, as *account) error {
	for _, e := range t.entries {
		path := filepath.Join(dir, filepath.FromSlash(e.rel))
		if err := e.write(path); err != nil {
			return fmt.Errorf("write template: %w", err)
		}
		if err := as.chown(path); err != nil {
			return fmt.Errorf("write template: %w", err)
		}
	}
	return nil
}

func (e *templateEntry) write(path string) error {
	perm := e.mode.Perm()
	if e.mode.IsDir() {
		if err := os.Mkdir(path, perm); err != nil {
			return err
		}
		return os.Chmod(path, perm) // past the umask
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(e.data)
	if err == nil && e.size > int64(len(e.data)) {
		err = f.Truncate(e.size)
	}
	if err == nil {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
