package devices

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watchSettle is how long the watch waits after a change for more: one
// save is several events (create, write, rename), and they make one call.
const watchSettle = 50 * time.Millisecond

// Watch calls onChange, from its own goroutine, each time the registry
// file may have changed on disk — a `rex device` in another shell, an
// editor. It watches the file's directory, for a save replaces the file
// by a rename (a watch on the file itself would go deaf after the first
// save), and for a symlinked registry the directory of the file the link
// points to as well. The directory is created (0700) if it does not exist
// yet, as a save would. Watch returns once the watch is set up; it ends
// when ctx does.
func (s *Store) Watch(ctx context.Context, onChange func()) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", s.path, err)
	}
	names := map[string]bool{filepath.Clean(s.path): true}
	dirs := []string{filepath.Dir(s.path)}
	if target, err := followLinks(s.path); err == nil && target != s.path {
		names[filepath.Clean(target)] = true
		dirs = append(dirs, filepath.Dir(target))
	}
	if err := os.MkdirAll(dirs[0], 0o700); err != nil {
		w.Close()
		return fmt.Errorf("watch %s: %w", s.path, err)
	}
	for _, d := range dirs {
		if err := w.Add(d); err != nil {
			w.Close()
			return fmt.Errorf("watch %s: %w", d, err)
		}
	}
	go func() {
		defer w.Close()
		settle := time.NewTimer(time.Hour)
		settle.Stop()
		for {
			select {
			case <-ctx.Done():
				settle.Stop()
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if names[filepath.Clean(ev.Name)] && ev.Op != fsnotify.Chmod {
					settle.Reset(watchSettle)
				}
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
				// An overflowed queue lost events: read the file again.
				settle.Reset(watchSettle)
			case <-settle.C:
				onChange()
			}
		}
	}()
	return nil
}
