package main

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// A job is the command that run runs while it holds the lock, and every
// process the command starts: its process tree.
//
// The command runs in a process group of its own (but see ownGroup). On Linux, distlock is a
// child subreaper (see becomeReaper): the processes the command leaves
// behind, background jobs and daemons that called setsid alike, become
// distlock's children when their parent exits, so distlock knows the
// whole tree, and the job is done only once every process of it has
// exited. Elsewhere the job is done once the command's process group is
// empty; a process that leaves the group escapes the job.
//
// In a terminal, the command is given the terminal's foreground when
// distlock has it (see terminal), so that it reads the terminal and gets
// ^C and ^Z from it as it would without distlock.
type job struct {
	cmd  *exec.Cmd
	pid  int       // the command's process
	term *terminal // distlock's controlling terminal, or nil
	// ownGroup: the command leads a process group of its own. It does
	// unless distlock, in the foreground of a terminal, shares its group
	// with other processes (a pipeline: distlock run ... | less), which
	// must keep the terminal too; the command then stays in distlock's.
	ownGroup bool

	exited chan struct{}  // closed once the command's process has exited
	done   chan struct{}  // closed once every process of the job has exited
	states chan stopState // the command's process stopped or continued

	// mu orders the reaping of distlock's children against the signals
	// sent to them, so that no signal reaches a process that reused the
	// id of a reaped one.
	mu     sync.Mutex
	reaped bool // the command's process was reaped; its status is set
	status int  // its exit status as a shell reports it: 128+N if killed by signal N
	signal int  // the signal that killed it, or 0
}

// A stopState is a change of the command's process between running and
// stopped.
type stopState struct {
	stopped bool
	signal  syscall.Signal // the signal that stopped it
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
// env and distlock's standard files. An executable text file that the
// system cannot run (a script without "#!") is run by /bin/sh, as
// execvp(3) and the shells do; like bash, run refuses a binary file that
// the system cannot run (status 126) rather than have sh read it.
func startJob(path string, argv, env []string) (*job, error) {
	if err := becomeReaper(); err != nil {
		return nil, exitf(exitFailure, "cannot watch the processes of the command: %v", err)
	}
	term := openTerminal()
	j := &job{
		term:     term,
		ownGroup: !term.inForeground() || !othersInGroup(),
		exited:   make(chan struct{}),
		done:     make(chan struct{}),
		states:   make(chan stopState, 4),
	}
	err := j.start(path, argv, env)
	if isNotExecutable(err) && isText(path) {
		err = j.start(shellPath, append([]string{"sh", path}, argv[1:]...), env)
	}
	if err != nil {
		j.term.close()
		return nil, execError(argv[0], err)
	}
	j.pid = j.cmd.Process.Pid
	j.term.started()
	go j.reap()
	return j, nil
}

func (j *job) start(path string, argv, env []string) error {
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = sysProcAttr(j.term, j.ownGroup)
	j.cmd = cmd
	return cmd.Start()
}

// finish gives the terminal back to distlock if the command's group
// still has it, and frees what the job holds. Call it once done is
// closed.
func (j *job) finish() {
	j.term.takeBack(j.pid)
	j.term.close()
	_ = j.cmd.Process.Release()
}

// handOver gives the command's process group the terminal's foreground
// if distlock has it: distlock was brought to the foreground.
func (j *job) handOver() {
	if j.ownGroup {
		j.term.handOver(j.pid)
	}
}

// exitStatus is the exit status of the command once it has exited, as a
// shell reports it: 128+N if it was killed by signal N.
func (j *job) exitStatus() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.reaped {
		return exitFailure
	}
	return j.status
}

// killedBy reports the signal that killed the command, if one did.
func (j *job) killedBy() (int, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.signal, j.signal != 0
}

// stateChanged passes a stop or continue of the command's process on to
// the supervisor, dropping it if the supervisor lags far behind.
func (j *job) stateChanged(s stopState) {
	select {
	case j.states <- s:
	default:
	}
}

// isText reports whether the file at path looks like text, as bash judges
// a file it may hand to the shell: no NUL byte in its first line (of at
// most 80 bytes).
func isText(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 80)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	if i := bytes.IndexByte(head, '\n'); i >= 0 {
		head = head[:i]
	}
	return bytes.IndexByte(head, 0) < 0
}
