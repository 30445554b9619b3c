//go:build !unix

package chain

import (
	"os"
	"os/exec"
)

func setProcessGroup(*exec.Cmd) {}

type signalInfo struct {
	name string
	num  int
}

func exitSignal(*os.ProcessState) (signalInfo, bool) { return signalInfo{}, false }

func isNotDir(error) bool { return false }
