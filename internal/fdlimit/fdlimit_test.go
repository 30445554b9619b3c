package fdlimit

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestRaise starts this test binary again with a soft limit of 1024 (the
// usual default) under a higher hard one, and checks that Raise leaves the
// soft limit at the hard one (less the one Go's runtime keeps back).
func TestRaise(t *testing.T) {
	if os.Getenv("FDLIMIT_CHILD") == "1" {
		soft, err := Raise()
		if err != nil {
			t.Fatal(err)
		}
		var lim syscall.Rlimit
		syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
		os.Stdout.WriteString("soft=" + strconv.FormatUint(soft, 10) + " cur=" + strconv.FormatUint(lim.Cur, 10) + " max=" + strconv.FormatUint(lim.Max, 10) + "\n")
		return
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Max != rlimInfinity && lim.Max <= 1025 {
		t.Fatalf("the hard limit on open files here is %d: the test needs more than 1025 to show a raise", lim.Max)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", `ulimit -Sn 1024 && exec "$0" -test.run='^TestRaise$' -test.v`, exe)
	cmd.Env = append(os.Environ(), "FDLIMIT_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var soft, cur, max uint64
	for _, f := range strings.Fields(string(out)) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		n, _ := strconv.ParseUint(v, 10, 64)
		switch k {
		case "soft":
			soft = n
		case "cur":
			cur = n
		case "max":
			max = n
		}
	}
	want := max
	if max == rlimInfinity {
		want = nrOpen()
	}
	if cur+1 < want || soft != cur {
		t.Fatalf("started with a soft limit of 1024 under a hard one of %d, Raise left %d (reported %d); output:\n%s", max, cur, soft, out)
	}
}

// TestExplain: running out of descriptors is recognised through the
// wrappers the net and os packages put around it, and said as such.
func TestExplain(t *testing.T) {
	wrapped := &os.PathError{Op: "open", Path: "/home/op/.ssh/known_hosts", Err: syscall.EMFILE}
	if !Exhausted(wrapped) || !Exhausted(syscall.ENFILE) || Exhausted(syscall.EACCES) || Exhausted(nil) {
		t.Fatal("Exhausted misreads errors")
	}
	got := Explain("connect h1", wrapped)
	if !strings.HasPrefix(got, "connect h1: rex has run out of open files (limit ") || !strings.Contains(got, "lower --concurrency") {
		t.Errorf("Explain: %q", got)
	}
	if got := Explain("connect h1", syscall.ENFILE); !strings.Contains(got, "the system has run out of open files") {
		t.Errorf("Explain(ENFILE): %q", got)
	}
}
