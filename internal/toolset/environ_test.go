package toolset

import (
	"os"
	"strconv"
	"testing"
)

// TestProcessEnvironmentHoldsCredentials: read and grep run
// without asking and what they return goes to the model's provider. On
// local they run in rex's own rexd, as the operator, with root / (a device
// without roots), so they reach /proc, where every process of the
// operator's shows its environment: rex's holds REX_SECRETS_PASSPHRASE
// (the console's server cannot run without it; rexd's parent, named in
// /proc/self/stat), a shell's whatever tokens were exported. A process's
// environ is refused like ~/.ssh, by name and with /proc/self resolved.
func TestProcessEnvironmentHoldsCredentials(t *testing.T) {
	pid := strconv.Itoa(os.Getpid())
	for _, p := range []string{"/proc/" + pid + "/environ", "/proc/self/environ", "/proc/1/task/1/environ"} {
		if credential(p) == "" {
			t.Errorf("credential(%q) is empty: the file tools would hand a process's environment to the model", p)
		}
	}
	if err := credentialPath("environ", "/proc/self", true); err == nil {
		t.Errorf("credentialPath(environ in /proc/self) is allowed")
	}
	if credential("/proc/cpuinfo") != "" {
		t.Errorf("/proc/cpuinfo is refused")
	}
}
