package sqltest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// EnvPostgresBinDir is the environment variable that, when set to a
// non-empty value, names the directory holding the PostgreSQL binaries
// (postgres and initdb) to use instead of looking for them.
const EnvPostgresBinDir = "DISTLOCK_POSTGRES_BINDIR"

// EnvMariaDBD is the environment variable that, when set to a non-empty
// value, names the mariadbd binary to use instead of looking for it.
// mariadb-install-db is then looked for beside it first.
const EnvMariaDBD = "DISTLOCK_MARIADBD"

// ErrNotFound is returned (wrapped) by [NewPostgres], [StartPostgres],
// [NewMariaDB] and [StartMariaDB] when the server's binaries cannot be
// found. The error's message tells the user how to install them.
var ErrNotFound = errors.New("sqltest: server binaries not found")

// postgresBinDirs is where Debian and Ubuntu's postgresql packages put
// each major version's binaries.
const postgresBinDirs = "/usr/lib/postgresql/*/bin"

// postgresBinDir returns the directory of the PostgreSQL binaries: the
// value of $DISTLOCK_POSTGRES_BINDIR if set; otherwise the newest
// /usr/lib/postgresql/VERSION/bin that has both postgres and initdb;
// otherwise the directory of initdb found in PATH, if postgres is there
// too.
func postgresBinDir() (string, error) {
	notFound := func(detail string) error {
		return fmt.Errorf("%w: PostgreSQL's postgres and initdb%s: install them with `sudo apt-get install -y postgresql` (Debian/Ubuntu) or set %s",
			ErrNotFound, detail, EnvPostgresBinDir)
	}
	if v := os.Getenv(EnvPostgresBinDir); v != "" {
		if !hasPostgres(v) {
			return "", notFound(fmt.Sprintf(" (not in %s=%q)", EnvPostgresBinDir, v))
		}
		return v, nil
	}
	dirs, _ := filepath.Glob(postgresBinDirs)
	slices.SortFunc(dirs, func(a, b string) int { // newest first
		return compareVersions(filepath.Base(filepath.Dir(b)), filepath.Base(filepath.Dir(a)))
	})
	for _, d := range dirs {
		if hasPostgres(d) {
			return d, nil
		}
	}
	if initdb, err := exec.LookPath("initdb"); err == nil {
		if d := filepath.Dir(initdb); hasPostgres(d) {
			return d, nil
		}
	}
	return "", notFound("")
}

// hasPostgres reports whether dir has executable postgres and initdb.
func hasPostgres(dir string) bool {
	return isExecutable(filepath.Join(dir, "postgres")) && isExecutable(filepath.Join(dir, "initdb"))
}

// isExecutable reports whether path is an executable file.
func isExecutable(path string) bool {
	_, err := exec.LookPath(path)
	return err == nil
}

// compareVersions compares dotted version numbers such as "15" and "9.6"
// numerically, part by part.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x - y
		}
	}
	return strings.Compare(a, b)
}

// mariadbBinaries returns the paths of mariadbd and mariadb-install-db.
// mariadbd is $DISTLOCK_MARIADBD if set, otherwise mariadbd (or mysqld)
// in PATH or /usr/sbin. mariadb-install-db (or mysql_install_db) is
// looked for beside mariadbd, in ../bin from it, in PATH, then in
// /usr/bin.
func mariadbBinaries() (server, install string, err error) {
	notFound := func(what, detail string) error {
		return fmt.Errorf("%w: MariaDB's %s%s: install it with `sudo apt-get install -y mariadb-server` (Debian/Ubuntu) or set %s",
			ErrNotFound, what, detail, EnvMariaDBD)
	}
	if v := os.Getenv(EnvMariaDBD); v != "" {
		server, err = exec.LookPath(v)
		if err != nil {
			return "", "", notFound("mariadbd", fmt.Sprintf(" (%s=%q: %v)", EnvMariaDBD, v, err))
		}
	} else if server = findExecutable([]string{"mariadbd", "mysqld"}, "/usr/sbin"); server == "" {
		return "", "", notFound("mariadbd", "")
	}
	dir := filepath.Dir(server)
	install = findExecutable([]string{"mariadb-install-db", "mysql_install_db"},
		dir, filepath.Join(filepath.Dir(dir), "bin"), "", "/usr/bin")
	if install == "" {
		return "", "", notFound("mariadb-install-db", "")
	}
	return server, install, nil
}

// findExecutable returns the first of names found as an executable in
// the first of dirs that has one, where "" stands for PATH, or "".
// PATH is searched first if dirs has no "".
func findExecutable(names []string, dirs ...string) string {
	if !slices.Contains(dirs, "") {
		dirs = append([]string{""}, dirs...)
	}
	for _, d := range dirs {
		for _, n := range names {
			p := n
			if d != "" {
				p = filepath.Join(d, n)
			}
			if path, err := exec.LookPath(p); err == nil {
				if abs, err := filepath.Abs(path); err == nil {
					return abs
				}
				return path
			}
		}
	}
	return ""
}
