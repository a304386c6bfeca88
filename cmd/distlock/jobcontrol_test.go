//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/distlock/distlock/redistest"
)

// TestRunJobControl drives distlock from an interactive bash in a
// pseudo-terminal, as a user at a terminal would: started with "&", then
// brought back with "fg", its command reads the terminal; ^Z stops it and
// fg continues it; ^C ends it, and run exits with 130. In a pipeline, the
// other processes read the terminal too.
func TestRunJobControl(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash for job control")
	}
	srv := redistest.Start(t)
	c := newClient(t, srv)
	dir := t.TempDir()
	sh := startShell(t, dir)
	run := binary + " run --redis " + srv.URL() + " jobs -- "

	// Read the terminal: in the background the command stops (SIGTTIN), and
	// distlock with it; fg gives the command the terminal.
	got := filepath.Join(dir, "got")
	sh.send(run + `sh -c 'read line; echo "got $line" >` + got + `' &` + "\n")
	sh.expect(t, "Stopped")
	sh.send("fg\n")
	sh.send("hello\n")
	awaitContent(t, got, "got hello\n")
	sh.send("echo status=$?\n")
	sh.expect(t, "status=0")

	// In a pipeline, the other processes of the job keep the terminal.
	partner := filepath.Join(dir, "partner")
	sh.send(run + `sh -c 'read line; echo "$line"' | sh -c 'read a; read b </dev/tty; echo "$a $b" >` + partner + `'` + "\n")
	sh.send("from-command\n")
	sh.send("from-partner\n")
	awaitContent(t, partner, "from-command from-partner\n")
	sh.send("echo status=$?\n")
	sh.expect(t, "status=0")

	// ^Z and fg, then ^C.
	out, pid := filepath.Join(dir, "out"), filepath.Join(dir, "pid")
	sh.send(run + `sh -c 'echo $$ >` + pid + `; exec cat >` + out + `' &` + "\n")
	awaitFile(t, pid)
	sh.expect(t, "Stopped")
	sh.send("fg\n")
	sh.send("ping\n")
	awaitContent(t, out, "ping\n")
	sh.send("\x1a") // ^Z
	sh.expect(t, "Stopped")
	if !inspect(t, c, "jobs").Locked {
		t.Error("the lock was released while the command was stopped")
	}
	sh.send("fg\n")
	sh.send("pong\n")
	awaitContent(t, out, "ping\npong\n")
	sh.send("\x03") // ^C, which also discards what is typed after it until bash reads again
	sh.expect(t, "^C")
	sh.expect(t, "$ ")
	sh.send("echo status=$?\n")
	sh.expect(t, "status=130")
	if info := inspect(t, c, "jobs"); info.Locked {
		t.Errorf("lock still held after ^C: %+v", info)
	}
}

// A shell is an interactive bash in a pseudo-terminal.
type shell struct {
	pty *os.File // the terminal's master side

	mu     sync.Mutex
	output bytes.Buffer // what the terminal showed
	seen   int          // how much of output expect has consumed
}

// startShell starts bash in a new pseudo-terminal, in dir; it is killed
// when the test ends.
func startShell(t *testing.T, dir string) *shell {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	var unlock int32
	var n uint32
	if err := ioctl(int(master.Fd()), syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		t.Fatal(err)
	}
	if err := ioctl(int(master.Fd()), syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	cmd := exec.Command("bash", "--norc", "--noprofile", "-i")
	cmd.Dir = dir
	cmd.Env = append(testEnv(), "PS1=$ ", "TERM=dumb", "HISTFILE=/dev/null")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sh := &shell{pty: master}
	var reader sync.WaitGroup
	reader.Go(func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			sh.mu.Lock()
			sh.output.Write(buf[:n])
			sh.mu.Unlock()
			if err != nil {
				return
			}
		}
	})
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		master.Close()
		reader.Wait()
		if t.Failed() {
			t.Logf("the terminal showed:\n%s", sh.output.String())
		}
	})
	sh.send("set -b\n") // report stopped jobs at once
	return sh
}

// send types s at the terminal.
func (sh *shell) send(s string) {
	_, _ = sh.pty.WriteString(s)
}

// expect waits until the terminal shows s after what the last expect
// consumed, and consumes up to it.
func (sh *shell) expect(t *testing.T, s string) {
	t.Helper()
	eventually(t, "the terminal to show "+strconv.Quote(s), func() bool {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		i := strings.Index(sh.output.String()[sh.seen:], s)
		if i < 0 {
			return false
		}
		sh.seen += i + len(s)
		return true
	})
}

// awaitContent waits until the file at path holds want: the command has
// read what was typed at the terminal.
func awaitContent(t *testing.T, path, want string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s to hold %q", path, want), func() bool {
		b, _ := os.ReadFile(path)
		return string(b) == want
	})
}
