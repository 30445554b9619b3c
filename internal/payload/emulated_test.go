//go:build linux

package payload_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/payload"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

// TestEmbeddedBuildsServe runs every rexd build this rex carries (as
// `make build` embeds them) and has it serve a session and a command
// through rex's own client: natively for this machine's platform, under
// QEMU's user-mode emulator for the others (CI installs qemu-user), so a
// build for a Raspberry Pi or an ARM server is known to start and answer,
// not only to compile.
func TestEmbeddedBuildsServe(t *testing.T) {
	src := payload.Embedded()
	plats := src.Platforms()
	if len(plats) == 0 {
		t.Fatal("this test binary carries no rexd builds: run `make payload` first (make test does)")
	}
	emulator := map[string]string{"linux/arm": "qemu-arm", "linux/arm64": "qemu-aarch64", "linux/amd64": "qemu-x86_64"}
	for _, p := range plats {
		t.Run(p, func(t *testing.T) {
			b, err := src.Rexd(filepath.Dir(p), filepath.Base(p))
			if err != nil {
				t.Fatal(err)
			}
			data, err := b.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			bin := filepath.Join(dir, "rexd")
			if err := os.WriteFile(bin, data, 0o755); err != nil {
				t.Fatal(err)
			}
			if p != runtime.GOOS+"/"+runtime.GOARCH {
				emu, err := exec.LookPath(emulator[p])
				if err != nil {
					t.Fatalf("running the %s build needs %q (Debian: apt-get install qemu-user): %v", p, emulator[p], err)
				}
				wrapper := filepath.Join(dir, "rexd-emulated")
				script := "#!/bin/sh\nexec " + emu + " " + bin + " \"$@\"\n"
				if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
					t.Fatal(err)
				}
				bin = wrapper
			}
			// Bounds for an answer that never comes under emulation on a
			// loaded machine, not speed goals.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			root := t.TempDir()
			c, err := rexclient.StartLocal(ctx, bin, "--root", root, "--no-audit")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "payload-test"})
			if err != nil {
				t.Fatalf("session.open: %v", err)
			}
			if s.Info.Platform != p {
				t.Errorf("the %s build says it runs on %q", p, s.Info.Platform)
			}
			var out bytes.Buffer
			proc, err := s.Exec(ctx, protocol.ExecStartParams{Argv: []string{"sh", "-c", "echo served by $0", p}}, rexclient.ExecOptions{Stdout: &out})
			if err != nil {
				t.Fatalf("exec.start: %v", err)
			}
			exit, err := proc.Wait(ctx)
			if err != nil || exit.ExitCode == nil || *exit.ExitCode != 0 || out.String() != "served by "+p+"\n" {
				t.Errorf("the %s build ran a command: exit %+v, %v, output %q", p, exit, err, out.String())
			}
		})
	}
}
