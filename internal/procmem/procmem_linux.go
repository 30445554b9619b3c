package procmem

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
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
	var r Released
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &st); err != nil {
		return r, fmt.Errorf("finding the executable: %w", err)
	}
	maps, err := os.Open("/proc/self/maps")
	if err != nil {
		return r, fmt.Errorf("reading the process's mappings: %w", err)
	}
	defer maps.Close()
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return r, fmt.Errorf("reading the process's page map: %w", err)
	}
	defer pagemap.Close()
	page := uint64(os.Getpagesize())
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		m, ok := parseMapping(sc.Text())
		if !ok || m.writable || m.inode != st.Ino || m.major != unix.Major(st.Dev) || m.minor != unix.Minor(st.Dev) {
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
			if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(lo), uintptr(n), unix.MADV_DONTNEED); errno != 0 {
				return r, fmt.Errorf("dropping %d bytes of the executable at %#x: %w", n, lo, errno)
			}
			r.Dropped += int64(n)
			own -= n
		}
		r.Kept += int64(own)
	}
	if err := sc.Err(); err != nil {
		return r, fmt.Errorf("reading the process's mappings: %w", err)
	}
	return r, nil
}

func readPagemap(f *os.File, firstPage uint64, entries []uint64) error {
	buf := make([]byte, 8*len(entries))
	if _, err := f.ReadAt(buf, int64(firstPage*8)); err != nil && err != io.EOF {
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
