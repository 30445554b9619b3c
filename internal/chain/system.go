package chain

import (
	"embed"
	"io/fs"
)

// systemFiles is the standard system space: the runtimes under
// system/.ai/tools/rex/core/runtimes and their helper files.
//
//go:embed all:system
var systemFiles embed.FS

// embeddedSystem returns the standard system space rooted at the directory
// that holds .ai/.
func embeddedSystem() (fs.FS, error) {
	return fs.Sub(systemFiles, "system")
}
