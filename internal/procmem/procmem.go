// Package procmem gives back memory a long-lived, mostly idle process
// (the rex server) no longer needs: the pages of its own executable that
// its start touched.
//
// A Go program's package initialisers are spread over its whole text, and
// the kernel maps the pages around each one it faults in (fault-around,
// 64 KiB by default): rex's start leaves 30-40 MB of its binary in its
// resident set that an idle server never runs again. Those pages are clean
// copies of the file, which the kernel may drop at any time and read again
// when they are next used; ReleaseExecutable drops them now, as
// debug.FreeOSMemory does for the heap. They leave the process's resident
// set; the page cache keeps them until the kernel needs the memory, which
// it can then take without unmapping them from rex first. A binary
// rewritten in place (not replaced by a rename) would be read anew, as
// the kernel's own reclaim of those pages would do.
package procmem

// Released says what ReleaseExecutable did: how many bytes of the
// executable's read-only mappings it asked the kernel to drop, and how many
// it kept because they are the process's own copies (pages the dynamic
// loader wrote relocations into before it made them read-only: dropping
// those would lose the relocations).
type Released struct {
	Dropped, Kept int64
}
