package devices

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWatch: a save by another store (another rex process) is noticed,
// once the save is done, for a plain and for a symlinked registry, and
// for a registry whose directory did not exist yet.
func TestWatch(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) string // returns the path the watcher opens
	}{
		{"plain, no directory yet", func(t *testing.T, dir string) string {
			return filepath.Join(dir, "config", "rex", FileName)
		}},
		{"symlinked", func(t *testing.T, dir string) string {
			real := filepath.Join(dir, "dotfiles", FileName)
			if err := os.MkdirAll(filepath.Dir(real), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(real, []byte(`{"devices":{}}`), 0o600); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(dir, "config", FileName)
			os.MkdirAll(filepath.Dir(link), 0o700)
			if err := os.Symlink(real, link); err != nil {
				t.Fatal(err)
			}
			return link
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.setup(t, t.TempDir())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			changed := make(chan struct{}, 16)
			if err := NewStore(path).Watch(ctx, func() { changed <- struct{}{} }); err != nil {
				t.Fatal(err)
			}
			// Another process adds a device.
			other := NewStore(path)
			err := other.Update(ctx, func(r *Registry) error {
				d, err := NewDevice("web1", "root@10.0.0.1", 0, "", "")
				if err != nil {
					return err
				}
				_, err = r.Add(d, false)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-changed:
			case <-time.After(10 * time.Second):
				t.Fatal("the watch never noticed the save")
			}
			// The file it reads then holds the new device.
			reg, err := NewStore(path).Load()
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := reg.Device("web1"); !ok {
				t.Error("the saved device is not in the file")
			}
			// The watch lives on after the rename: a second save is seen too.
			for len(changed) > 0 {
				<-changed
			}
			if err := other.Update(ctx, func(r *Registry) error { return r.CreateGroup("web") }); err != nil {
				t.Fatal(err)
			}
			select {
			case <-changed:
			case <-time.After(10 * time.Second):
				t.Fatal("the watch went deaf after the first save")
			}
		})
	}
}
