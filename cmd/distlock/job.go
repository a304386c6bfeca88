package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// A job is the command that run runs while it holds the lock.
//
// Outside a terminal (cron, systemd, scripts) the command runs in a process
// group of its own, and signals go to that whole group, so that the
// processes the command starts are stopped with it when the lock is lost.
// In the foreground of a terminal the command stays in distlock's process
// group instead, so that it can read the terminal and gets ^C, ^\ and ^Z
// from it directly, as it would without distlock; signals then go to the
// command's process alone. See sysProcAttr and forwards.
type job struct {
	cmd      *exec.Cmd
	ownGroup bool          // the command leads a process group of its own
	done     chan struct{} // closed once the process has exited and been reaped

	mu     sync.Mutex
	exited bool // the process has exited: its group may no longer be signalled
}

// lookCommand finds the executable of the command name as a shell would,
// and reports a missing command with status 127 and one that cannot be
// run with status 126.
func lookCommand(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err == nil {
		return path, nil
	}
	return "", execError(name, err)
}

// execError turns the failure to find or start the command name into an
// exitError with the status a shell would use.
func execError(name string, err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		err = ee.Err
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return exitf(exitNotFound, "%s: command not found", name)
	case errors.Is(err, exec.ErrDot):
		return exitf(exitNotFound, "%s: command not found (it is in the current directory: run ./%s)", name, name)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EISDIR):
		return exitf(exitCannotExec, "%s: permission denied: not an executable file", name)
	}
	return exitf(exitCannotExec, "%s: cannot run: %v", name, err)
}

// startJob starts the command argv, found at path, with the environment
// env and distlock's standard files.
func startJob(path string, argv, env []string) (*job, error) {
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	j := &job{cmd: cmd, ownGroup: !inForeground(), done: make(chan struct{})}
	cmd.SysProcAttr = sysProcAttr(j.ownGroup)
	if err := cmd.Start(); err != nil {
		return nil, execError(argv[0], err)
	}
	go j.wait()
	return j, nil
}

// wait reaps the process and closes j.done.
func (j *job) wait() {
	if awaitExit(j.cmd.Process) {
		j.markExited()
	}
	_ = j.cmd.Wait() // a failure shows in ProcessState
	j.markExited()
	close(j.done)
}

func (j *job) markExited() {
	j.mu.Lock()
	j.exited = true
	j.mu.Unlock()
}

// signal sends sig to the command: to its whole process group if it has
// one of its own, else to its process. It does nothing once the process
// has exited, so it never signals a process that reused its id.
func (j *job) signal(sig os.Signal) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.exited {
		return
	}
	signalJob(j, sig)
}

// exitStatus is the exit status of the command once it has exited, as a
// shell reports it: 128+N if it was killed by signal N.
func (j *job) exitStatus() int {
	st := j.cmd.ProcessState
	if st == nil {
		return exitFailure
	}
	if n, ok := killedBy(st); ok {
		return exitSignal + n
	}
	return st.ExitCode()
}
