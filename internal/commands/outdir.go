package commands

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/rexconsole/rex/internal/fanout"
)

// outdirSink writes each target's stdout and stderr to DIR/<target>.out
// and DIR/<target>.err (pssh -o and -e). A file is written under a
// temporary name and renamed when its target ends, so a file that exists
// is whole and an earlier run's is replaced at once.
type outdirSink struct {
	dir string

	mu    sync.Mutex
	files map[string]*[2]*os.File
	err   error // the first write error, reported by finish
}

func newOutdirSink(dir string) (*outdirSink, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--outdir: %w", err)
	}
	return &outdirSink{dir: dir, files: map[string]*[2]*os.File{}}, nil
}

// outName is a target's file name: its name with nothing that could
// leave the directory.
func outName(target string) string {
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == 0 {
			return '_'
		}
		return r
	}, target)
	if strings.HasPrefix(name, ".") {
		name = "_" + name
	}
	return name
}

func (s *outdirSink) event(ev fanout.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.Kind {
	case fanout.EventStart:
		fs := &[2]*os.File{}
		for i, ext := range []string{".out", ".err"} {
			f, err := os.CreateTemp(s.dir, "."+outName(ev.Target)+ext+".*")
			if err != nil {
				s.fail(err)
				continue
			}
			fs[i] = f
		}
		s.files[ev.Target] = fs
	case fanout.EventStdout, fanout.EventStderr:
		fs := s.files[ev.Target]
		i := 0
		if ev.Kind == fanout.EventStderr {
			i = 1
		}
		if fs == nil || fs[i] == nil {
			return
		}
		if _, err := fs[i].Write(ev.Data); err != nil {
			s.fail(err)
		}
	case fanout.EventResult:
		s.close(ev.Target, true)
	}
}

// close ends a target's files: renamed into place when keep, else removed.
func (s *outdirSink) close(target string, keep bool) {
	fs := s.files[target]
	if fs == nil {
		return
	}
	delete(s.files, target)
	for i, ext := range []string{".out", ".err"} {
		f := fs[i]
		if f == nil {
			continue
		}
		err := f.Close()
		if err == nil && keep {
			err = os.Rename(f.Name(), filepath.Join(s.dir, outName(target)+ext))
		}
		if err != nil || !keep {
			os.Remove(f.Name())
		}
		if err != nil {
			s.fail(err)
		}
	}
}

func (s *outdirSink) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

func (s *outdirSink) finish(*fanout.Summary) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t := range s.files {
		s.close(t, true)
	}
}

// Err reports the first file error of the run.
func (s *outdirSink) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return fmt.Errorf("--outdir %s: %w", s.dir, s.err)
	}
	return nil
}
