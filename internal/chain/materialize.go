package chain

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// completeMarker is written last into a materialized system space, so a
// half-written directory is never used.
const completeMarker = ".rex-complete"

// materializeSystem writes the system space to SystemDir/system-<hash>,
// where <hash> covers every file, so each rex build gets its own immutable
// copy. Concurrent writers each build a private temporary directory and
// rename it into place; the loser discards its copy.
func (e *Engine) materializeSystem() (string, error) {
	if e.systemDir == "" {
		return "", errors.New("the tool needs files from the system space on disk, but no system directory is configured; set Options.SystemDir (e.g. $XDG_CACHE_HOME/rex/chain)")
	}
	sys := e.byspace[SpaceSystem].fsys
	type file struct {
		rel  string
		data []byte
	}
	var files []file
	h := sha256.New()
	err := fs.WalkDir(sys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := fs.ReadFile(sys, p)
		if err != nil {
			return err
		}
		files = append(files, file{p, b})
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("read the system space: %w", err)
	}
	dir := filepath.Join(e.systemDir, "system-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, completeMarker)); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(e.systemDir, 0o755); err != nil {
		return "", fmt.Errorf("create system directory: %w", err)
	}
	tmp, err := os.MkdirTemp(e.systemDir, ".system-tmp-*")
	if err != nil {
		return "", fmt.Errorf("write the system space: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	for _, f := range files {
		dst := filepath.Join(tmp, filepath.FromSlash(f.rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", fmt.Errorf("write the system space: %w", err)
		}
		if err := os.WriteFile(dst, f.data, 0o644); err != nil {
			return "", fmt.Errorf("write the system space: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, completeMarker), nil, 0o644); err != nil {
		return "", fmt.Errorf("write the system space: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("write the system space: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, completeMarker)); serr == nil {
			return dir, nil // another writer won
		}
		return "", fmt.Errorf("write the system space to %s: %w", dir, err)
	}
	return dir, nil
}
