package payload

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
)

// LocalRexd returns the path of a rexd that runs on this machine, for the
// `local` target: a `rexd` beside the running executable (a development
// build: bin/rex next to bin/rexd), else the build from src installed under
// cacheDir/rexd/<version>-<hash12>/rexd, written atomically once.
func LocalRexd(src Source, cacheDir, version string) (string, error) {
	if exe, err := os.Executable(); err == nil {
		sib := filepath.Join(filepath.Dir(exe), "rexd")
		if fi, err := os.Stat(sib); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return sib, nil
		}
	}
	b, err := src.Rexd(runtime.GOOS, runtime.GOARCH)
	if err != nil {
		return "", fmt.Errorf("find a rexd for the local machine: %w", err)
	}
	dir := filepath.Join(cacheDir, "rexd", version+"-"+b.SHA256[:12])
	path := filepath.Join(dir, "rexd")
	if ok, _ := sameHash(path, b.SHA256); ok {
		return path, nil
	}
	data, err := b.Bytes()
	if err != nil {
		return "", fmt.Errorf("install local rexd: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("install local rexd: %w", err)
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := filepath.Join(dir, ".rexd-"+hex.EncodeToString(rnd[:])+".tmp")
	if err := os.WriteFile(tmp, data, 0o755); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("install local rexd: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("install local rexd: %w", err)
	}
	return path, nil
}

func sameHash(path, want string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false, err
	}
	return hex.EncodeToString(h.Sum(nil)) == want, nil
}
