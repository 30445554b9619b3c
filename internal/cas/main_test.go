package cas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as a helper process, so concurrency can be
// tested across real processes: REX_CAS_HELPER names the role.
func TestMain(m *testing.M) {
	if role := os.Getenv("REX_CAS_HELPER"); role != "" {
		if err := runHelper(role, os.Args[len(os.Args)-1]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helperArgs is what a helper process is given, as JSON in its last
// argument.
type helperArgs struct {
	Store   string // store root
	Go      string // file whose appearance starts the work
	Snap    Digest // ref: the snapshot to set
	Data    string // put: the object to store is Data repeated Repeat times
	Repeat  int
	Dir     string // ingest: the directory to ingest
	Timeout time.Duration
}

func runHelper(role, arg string) error {
	var a helperArgs
	if err := json.Unmarshal([]byte(arg), &a); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.Timeout)
	defer cancel()
	s, err := Open(a.Store)
	if err != nil {
		return err
	}
	if a.Go != "" {
		for {
			if _, err := os.Stat(a.Go); err == nil {
				break
			}
			if ctx.Err() != nil {
				return errors.New("start signal never came")
			}
			time.Sleep(time.Millisecond)
		}
	}
	switch role {
	case "ref":
		_, err := s.UpdateRef(ctx, RefKey{Target: "dev", Path: "/srv/app"}, 0, a.Snap)
		switch {
		case err == nil:
			fmt.Println("won")
		case errors.Is(err, ErrRefConflict):
			fmt.Println("lost")
		default:
			return err
		}
	case "put":
		data := []byte(strings.Repeat(a.Data, a.Repeat))
		for range 20 {
			if err := s.Put(Object{Digest: DigestOf(data), Data: data}); err != nil {
				return err
			}
		}
		fmt.Println("ok")
	case "killswap":
		// Update Dir/site to the tree Snap atomically and die by SIGKILL
		// in the swap: before it (Data "before") or after it.
		root, err := os.OpenRoot(a.Dir)
		if err != nil {
			return err
		}
		die := func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
		opts := UpdateOptions{Atomic: true, beforeSwap: die}
		if a.Data == "after" {
			opts = UpdateOptions{Atomic: true, afterSwap: die}
		}
		_, err = s.Update(ctx, root, "site", a.Snap, opts)
		return fmt.Errorf("the update was to be killed, and ended: %v", err)
	case "ingest":
		_, problems, err := s.Ingest(ctx, a.Dir)
		if err != nil {
			return err
		}
		for _, p := range problems {
			fmt.Println(p.Path)
		}
	default:
		return fmt.Errorf("unknown helper role %q", role)
	}
	return nil
}

// helperCmd prepares the test binary as a helper process.
func helperCmd(t *testing.T, role string, a helperArgs) *exec.Cmd {
	t.Helper()
	if a.Timeout == 0 {
		a.Timeout = 30 * time.Second
	}
	arg, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$", string(arg))
	cmd.Env = append(os.Environ(), "REX_CAS_HELPER="+role)
	return cmd
}

// runHelpers starts n helpers, releases them together, and returns their
// outputs.
func runHelpers(t *testing.T, n int, role string, a helperArgs) []string {
	t.Helper()
	a.Go = t.TempDir() + "/go"
	cmds := make([]*exec.Cmd, n)
	outs := make([]*strings.Builder, n)
	for i := range cmds {
		cmds[i] = helperCmd(t, role, a)
		outs[i] = &strings.Builder{}
		cmds[i].Stdout = outs[i]
		cmds[i].Stderr = outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(a.Go, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var res []string
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("helper %d: %v: %s", i, err, outs[i])
		}
		res = append(res, strings.TrimSpace(outs[i].String()))
	}
	return res
}
