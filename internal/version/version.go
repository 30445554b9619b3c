// Package version names the release of rex and rexd. The build hash of a
// rexd binary is the SHA-256 of the binary itself, computed where needed, so
// no linker flags are involved and a corrupted copy can never pass as good.
package version

// Version is the release of rex and rexd.
const Version = "0.1.0"
