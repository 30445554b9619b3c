package procmem

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Bits of a /proc/PID/pagemap entry (Documentation/admin-guide/mm/pagemap.rst).
const (
	pmPresent = 1 << 63
	pmSwapped = 1 << 62
	pmFile    = 1 << 61 // file page or shared anonymous
)

// ReleaseExecutable drops the pages of the process's executable that are
// mapped read-only and are still the file's own (MADV_DONTNEED): the next
// use of one reads it from the page cache again. Pages of those mappings
// that the process owns a copy of (relocated data of a position-independent
// build, made read-only after the loader wrote it) are kept, as are the
// writable mappings (the program's data). Safe to call while other
// goroutines run: code they use faults back in.
func ReleaseExecutable() (Released, error) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return Released{}, fmt.Errorf("reading the process's mappings: %w", err)
	}
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return Released{}, fmt.Errorf("reading the process's page map: %w", err)
	}
	defer pagemap.Close()
	here := uint64(reflect.ValueOf(ReleaseExecutable).Pointer())
	return release(string(maps), pagemap, here, uint64(os.Getpagesize()), func(lo, n uint64) error {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(lo), uintptr(n), unix.MADV_DONTNEED); errno != 0 {
			return errno
		}
		return nil
	})
}

// release does ReleaseExecutable's work on the process's maps and page map:
// here is the address of code that is running, drop drops n bytes at lo.
func release(maps string, pagemap io.ReaderAt, here, page uint64, drop func(lo, n uint64) error) (Released, error) {
	var r Released
	// The page map is trusted only if it tells the page of the code
	// running now for what it is (in memory, the file's): one that read
	// as zeros would make every copy look droppable.
	var at [1]uint64
	if err := readPagemap(pagemap, here/page, at[:]); err != nil {
		return r, err
	}
	if at[0]&(pmPresent|pmFile) != pmPresent|pmFile {
		return r, fmt.Errorf("the page map does not tell the executable's pages from the process's own copies (%#x for running code)", at[0])
	}
	// The executable is the file of the mapping the running code is in, as
	// maps names it: stat's st_dev differs from it on btrfs and overlayfs.
	lines := strings.Split(maps, "\n")
	var exe mapping
	for _, l := range lines {
		if m, ok := parseMapping(l); ok && m.start <= here && here < m.end && m.inode != 0 {
			exe = m
			break
		}
	}
	if exe.inode == 0 {
		return r, fmt.Errorf("no mapping of a file holds the running code at %#x", here)
	}
	for _, l := range lines {
		m, ok := parseMapping(l)
		if !ok || m.writable || m.inode != exe.inode || m.major != exe.major || m.minor != exe.minor {
			continue
		}
		entries := make([]uint64, (m.end-m.start)/page)
		if err := readPagemap(pagemap, m.start/page, entries); err != nil {
			return r, err
		}
		own := uint64(len(entries)) * page
		for _, run := range droppable(entries) {
			lo := m.start + uint64(run.first)*page
			n := uint64(run.n) * page
			if err := drop(lo, n); err != nil {
				return r, fmt.Errorf("dropping %d bytes of the executable at %#x: %w", n, lo, err)
			}
			r.Dropped += int64(n)
			own -= n
		}
		r.Kept += int64(own)
	}
	return r, nil
}

// readPagemap reads the entries of the pages from firstPage on; a short
// read is an error, since an entry left at zero would read as droppable.
func readPagemap(f io.ReaderAt, firstPage uint64, entries []uint64) error {
	buf := make([]byte, 8*len(entries))
	if n, err := f.ReadAt(buf, int64(firstPage*8)); n != len(buf) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("reading the process's page map: %w", err)
	}
	for i := range entries {
		entries[i] = binary.LittleEndian.Uint64(buf[8*i:])
	}
	return nil
}

// mapping is one line of /proc/PID/maps.
type mapping struct {
	start, end   uint64
	writable     bool
	major, minor uint32
	inode        uint64
}

// parseMapping reads "start-end perms offset major:minor inode path".
func parseMapping(line string) (mapping, bool) {
	var m mapping
	f := strings.Fields(line)
	if len(f) < 5 {
		return m, false
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	if !ok {
		return m, false
	}
	var err1, err2, err3, err4, err5 error
	m.start, err1 = strconv.ParseUint(lo, 16, 64)
	m.end, err2 = strconv.ParseUint(hi, 16, 64)
	maj, min, ok := strings.Cut(f[3], ":")
	if !ok || len(f[1]) < 2 {
		return m, false
	}
	major, err3 := strconv.ParseUint(maj, 16, 32)
	minor, err4 := strconv.ParseUint(min, 16, 32)
	m.inode, err5 = strconv.ParseUint(f[4], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil || m.end < m.start {
		return m, false
	}
	m.major, m.minor = uint32(major), uint32(minor)
	m.writable = f[1][1] == 'w'
	return m, true
}

// run is a stretch of pages: the first's index and how many.
type run struct{ first, n int }

// droppable returns the stretches of pages that MADV_DONTNEED may drop
// without losing anything: those not in memory, and those in memory that
// are the file's page. A page the process has its own copy of (present and
// not a file page, or swapped out) would come back from the file without
// what was written into it.
func droppable(entries []uint64) []run {
	var runs []run
	start := -1
	for i, e := range entries {
		own := e&pmSwapped != 0 || (e&pmPresent != 0 && e&pmFile == 0)
		switch {
		case !own && start < 0:
			start = i
		case own && start >= 0:
			runs = append(runs, run{start, i - start})
			start = -1
		}
	}
	if start >= 0 {
		runs = append(runs, run{start, len(entries) - start})
	}
	return runs
}
