package rexclient

import "testing"

// Every event fits its buffer, in less than twice its size (4 KiB at
// least), and a buffer goes back to the class it came from.
func TestBufClasses(t *testing.T) {
	var b bufPools
	for _, n := range []int{0, 1, 4095, 4096, 4097, 65536, 65537, 80000, 131072, maxEvent - 1, maxEvent} {
		p := b.get(n)
		if c := cap(*p); c < n || c > max(4096, 2*n-1) || c&(c-1) != 0 {
			t.Errorf("%d bytes: a buffer of %d", n, c)
		}
		b.put(p)
		if q := b.get(n); cap(*q) != cap(*p) {
			t.Errorf("%d bytes: %d, then %d from the pool", n, cap(*p), cap(*q))
		}
	}
	if bufClass(maxEvent) != len(b)-1 {
		t.Errorf("the largest event is class %d of %d", bufClass(maxEvent), len(b))
	}
}
