package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lowerPriority sets the nice value of every thread of this process to n
// (Linux's nice is per thread; threads started later inherit it from the
// thread that starts them, which by then is niced too). With ssh, the
// process that started rexd is niced as well when it is an sshd: a bulk
// lane's own connection, whose decryption is the lane's work too. Only
// lowering is asked for, which needs no privilege.
func lowerPriority(n int, ssh bool) error {
	if ssh {
		ppid := os.Getppid()
		comm, err := os.ReadFile("/proc/" + strconv.Itoa(ppid) + "/comm")
		if err == nil && strings.HasPrefix(string(comm), "sshd") {
			if err := raise(ppid, n); err != nil {
				return fmt.Errorf("lower the priority of sshd (pid %d): %w", ppid, err)
			}
		}
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := raise(tid, n); err != nil {
			return fmt.Errorf("lower the priority of thread %d: %w", tid, err)
		}
	}
	return nil
}

// raise sets id's nice value to n unless it is already that low.
func raise(id, n int) error {
	// getpriority(2)'s raw value is 20 - nice.
	cur, err := unix.Getpriority(unix.PRIO_PROCESS, id)
	if err == nil && 20-cur >= n {
		return nil
	}
	return unix.Setpriority(unix.PRIO_PROCESS, id, n)
}
