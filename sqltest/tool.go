package sqltest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/distlock/distlock/internal/logtail"
)

// runTool runs bin with args in dir as the account as, with environment
// env and standard input stdin, and returns its combined output. On
// failure the error includes the end of the output. It is for the
// one-shot programs that make a template (initdb, mariadb-install-db).
func runTool(bin, dir string, env []string, as *account, stdin string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	cmd.SysProcAttr = sysProcAttr(as)
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		return out, fmt.Errorf("%s: %w\n--- end of output ---\n%s", cmd, err, logtail.Last(out))
	}
	return out, nil
}

// serverEnv returns the test's environment without the variables whose
// names start with one of prefixes (such as PGDATA or MYSQL_TCP_PORT),
// which would change what a server or its tools do, plus extra.
func serverEnv(prefixes []string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		drop := false
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				drop = true
				break
			}
		}
		if !drop {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}
