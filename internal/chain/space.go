package chain

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Space is where an item lives. Its value is its precedence: a higher space
// shadows a lower one, and an element may only depend on its own space or a
// lower one.
type Space int

// The three spaces, in precedence order.
const (
	SpaceSystem  Space = 1 // embedded in the binary, immutable
	SpaceUser    Space = 2 // $XDG_CONFIG_HOME/rex/.ai/tools
	SpaceProject Space = 3 // <project>/.ai/tools
)

// String returns "system", "user" or "project".
func (s Space) String() string {
	switch s {
	case SpaceSystem:
		return "system"
	case SpaceUser:
		return "user"
	case SpaceProject:
		return "project"
	}
	return fmt.Sprintf("space(%d)", int(s))
}

// MarshalText makes a Space read as its name in JSON.
func (s Space) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// toolsDir and configDir are the slash paths of a space's tools and config
// trees, relative to the space root (the directory that holds .ai/).
const (
	toolsDir  = ".ai/tools"
	configDir = ".ai/config"
)

// maxIDLen bounds an item id; ids come from files and command lines.
const maxIDLen = 256

// checkID reports whether id is a well-formed item id: slash-separated
// segments of letters, digits, '_', '-' and '.', no empty, "." or ".."
// segment and no leading dot, so an id can never leave .ai/tools.
func checkID(id string) error {
	if id == "" {
		return errors.New("item id is empty")
	}
	if len(id) > maxIDLen {
		return fmt.Errorf("item id is longer than %d characters", maxIDLen)
	}
	for _, seg := range strings.Split(id, "/") {
		if seg == "" {
			return fmt.Errorf("item id %q has an empty segment", id)
		}
		if seg[0] == '.' || seg[0] == '-' {
			return fmt.Errorf("item id %q has a segment starting with %q", id, seg[0])
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
			if !ok {
				return fmt.Errorf("item id %q contains %q; use letters, digits, '_', '-', '.' and '/'", id, c)
			}
		}
	}
	return nil
}

// itemFormat is how an item file's metadata is read.
type itemFormat int

const (
	formatPython itemFormat = iota
	formatYAML
	formatHashHeader  // "# rex: ..." comment header
	formatSlashHeader // "// rex: ..." comment header
)

// itemExts lists the file extensions that define items, in the order the
// candidates of an id are probed. Two of them defining the same id in one
// space is an error, so the order only matters for reporting.
func itemExts() [9]itemExt {
	return [...]itemExt{
		{".py", formatPython},
		{".yaml", formatYAML},
		{".yml", formatYAML},
		{".sh", formatHashHeader},
		{".bash", formatHashHeader},
		{".js", formatSlashHeader},
		{".mjs", formatSlashHeader},
		{".cjs", formatSlashHeader},
		{".ts", formatSlashHeader},
	}
}

type itemExt struct {
	ext    string
	format itemFormat
}

// formatOf returns the format of a file name's extension.
func formatOf(name string) (itemFormat, bool) {
	ext := path.Ext(name)
	for _, e := range itemExts() {
		if e.ext == ext {
			return e.format, true
		}
	}
	return 0, false
}

// spaceRoot is one space: a file system rooted at the directory holding .ai/
// and, for on-disk spaces, that directory's local path.
type spaceRoot struct {
	space Space
	fsys  fs.FS
	dir   string // local directory; "" for the embedded system space
}

// display names a space-relative file for people: its local path for on-disk
// spaces, "system:<rel>" for the embedded one.
func (r *spaceRoot) display(rel string) string {
	if r.dir == "" {
		return "system:" + rel
	}
	return filepath.Join(r.dir, filepath.FromSlash(rel))
}

// FindProjectRoot walks up from start to the first directory that contains
// a .ai directory and returns it. It returns "" and no error when there is
// none, which means the project space is empty.
func FindProjectRoot(start string) (string, error) {
	dir, err := filepath.Abs(start)
	if err != nil {
		return "", fmt.Errorf("find project root from %s: %w", start, err)
	}
	for range 4096 { // bounded: every step removes one path component
		fi, err := os.Stat(filepath.Join(dir, ".ai"))
		if err == nil && fi.IsDir() {
			return dir, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
			return "", fmt.Errorf("find project root: %w", err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", nil
		}
		dir = parent
	}
	return "", nil
}
