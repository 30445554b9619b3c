package rexd

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestSweepBuriesStaleSockets: opening the session directory sweeps it.
// A socket no process listens on any more (its rexd was killed) is
// replaced by a note, so that a late resume still says the session is
// gone; it was kept until a resume named it. A socket a process listens
// on, one just bound (its rexd may not listen yet), and the note of a
// session that ended and said why are kept; notes older than a day go.
func TestSweepBuriesStaleSockets(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sessions")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * staleSocketAge)
	socket := func(id string, at time.Time, listen bool) {
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, id+".sock"), Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		ln.SetUnlinkOnClose(false)
		if listen {
			t.Cleanup(func() { ln.Close() })
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}()
		} else {
			ln.Close()
		}
		if err := os.Chtimes(filepath.Join(dir, id+".sock"), at, at); err != nil {
			t.Fatal(err)
		}
	}
	note := func(id string, reason string, at time.Time) {
		b, _ := json.Marshal(tombstone{Reason: reason, At: at})
		p := filepath.Join(dir, id+".ended")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	const (
		stale      = "s_1-0a"
		fresh      = "s_2-0b"
		live       = "s_3-0c"
		staleNoted = "s_4-0d"
		oldNote    = "s_5-0e"
	)
	socket(stale, old, false)
	socket(fresh, time.Now(), false)
	socket(live, old, true)
	socket(staleNoted, old, false)
	note(staleNoted, "it expired", time.Now())
	note(oldNote, "it expired long ago", time.Now().Add(-tombstoneKeep-time.Hour))

	rs := newResumeServer(t, func(c *Config) { c.SessionDir = dir })
	swept := make(chan struct{})
	rs.srv.resume.swept = func() { close(swept) }
	if _, err := rs.srv.sessionDir(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-swept:
	case <-time.After(30 * time.Second):
		t.Fatal("the sweep never ended")
	}

	exists := func(name string) bool {
		_, err := os.Lstat(filepath.Join(dir, name))
		return err == nil
	}
	for _, c := range []struct {
		name string
		want bool
	}{
		{stale + ".sock", false},
		{stale + ".ended", true},
		{fresh + ".sock", true},
		{live + ".sock", true},
		{staleNoted + ".sock", false},
		{oldNote + ".ended", false},
	} {
		if got := exists(c.name); got != c.want {
			t.Errorf("%s there after the sweep: %v, want %v", c.name, got, c.want)
		}
	}

	ctx := context.Background()
	for _, c := range []struct {
		id, reason string
	}{
		{stale, protocol.ResumeGone},
		{staleNoted, protocol.ResumeExpired},
	} {
		_, perr := rs.rawResume(ctx, protocol.SessionResumeParams{SessionID: c.id, ResumeToken: "x"})
		if r := refusal(t, perr); r.Reason != c.reason {
			t.Errorf("resume of %s: %s (%s), want %s", c.id, r.Reason, perr.Message, c.reason)
		}
	}
}
