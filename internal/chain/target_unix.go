//go:build unix

package chain

import (
	"errors"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// setProcessGroup runs the tool in its own process group so a timeout or
// cancellation stops everything it started, not just the interpreter.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		// Negative pid: the whole group.
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return cmd.Process.Kill()
		}
		return nil
	}
}

type signalInfo struct {
	name string
	num  int
}

func exitSignal(ps *os.ProcessState) (signalInfo, bool) {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return signalInfo{}, false
	}
	sig := ws.Signal()
	return signalInfo{name: unix.SignalName(sig), num: int(sig)}, true
}

func isNotDir(err error) bool { return errors.Is(err, syscall.ENOTDIR) }
