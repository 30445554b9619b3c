// Package version names the release of rex and rexd. The build hash of a
// rexd binary is the SHA-256 of the binary itself, computed where needed, so
// no linker flags are involved and a corrupted copy can never pass as good.
package version

// Version is the release of rex and rexd. It is a variable only so that
// a test can build a rex of another version (-ldflags -X) to meet a rex
// server of this one; nothing else sets it.
var Version = "0.1.0"
