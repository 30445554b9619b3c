package tui

import (
	"fmt"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// memoFields are caches of drawn text that View may fill (memoised
// rendering): they change what is computed next time, never what is
// shown. Everything else reachable from the model is state View must
// leave alone.
var memoFields = map[string]bool{
	"Drawn":     true,                                   // a line's wrapped rows
	"drawnRows": true, "drawnV": true, "drawnKey": true, // a terminal body
}

// fingerprint writes every value reachable from v, following pointers
// (each once), maps in key order, unexported fields included; memo
// fields, locks and atomics, and functions' identities are left out.
func fingerprint(b *strings.Builder, v reflect.Value, seen map[uintptr]bool, depth int) {
	if depth > 200 {
		b.WriteString("…")
		return
	}
	switch v.Kind() {
	case reflect.Invalid:
		b.WriteString("nil")
	case reflect.Pointer:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		addr := v.Pointer()
		if seen[addr] {
			fmt.Fprintf(b, "@%x", addr)
			return
		}
		seen[addr] = true
		fmt.Fprintf(b, "&%x", addr)
		fingerprint(b, v.Elem(), seen, depth+1)
	case reflect.Interface:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		b.WriteString(v.Elem().Type().String())
		fingerprint(b, v.Elem(), seen, depth+1)
	case reflect.Struct:
		if p := v.Type().PkgPath(); p == "sync" || p == "sync/atomic" {
			// Locks and atomics: their state is the goroutines' business
			// (and reading it plainly would race with them).
			b.WriteString(v.Type().String())
			return
		}
		// The fields a struct's locks guard are read holding them, as the
		// goroutines that write them do (tasks' and terminals' goroutines
		// run during the walk).
		defer lockFields(v)()
		b.WriteString("{")
		t := v.Type()
		for i := range v.NumField() {
			if memoFields[t.Field(i).Name] {
				continue
			}
			b.WriteString(t.Field(i).Name + ":")
			fingerprint(b, v.Field(i), seen, depth+1)
			b.WriteString(",")
		}
		b.WriteString("}")
	case reflect.Slice:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		fallthrough
	case reflect.Array:
		fmt.Fprintf(b, "[%d:", v.Len())
		for i := range v.Len() {
			fingerprint(b, v.Index(i), seen, depth+1)
			b.WriteString(",")
		}
		b.WriteString("]")
	case reflect.Map:
		keys := make([]string, 0, v.Len())
		vals := map[string]reflect.Value{}
		for it := v.MapRange(); it.Next(); {
			var kb strings.Builder
			fingerprint(&kb, it.Key(), seen, depth+1)
			keys = append(keys, kb.String())
			vals[kb.String()] = it.Value()
		}
		sort.Strings(keys)
		b.WriteString("map[")
		for _, k := range keys {
			b.WriteString(k + "=")
			fingerprint(b, vals[k], seen, depth+1)
			b.WriteString(",")
		}
		b.WriteString("]")
	case reflect.Func:
		fmt.Fprintf(b, "func(%v)", v.IsNil())
	case reflect.Chan:
		if v.IsNil() {
			b.WriteString("chan(nil)")
			return
		}
		fmt.Fprintf(b, "chan(%x,%d)", v.Pointer(), v.Len())
	case reflect.UnsafePointer:
		fmt.Fprintf(b, "%x", v.Pointer())
	case reflect.String:
		fmt.Fprintf(b, "%q", v.String())
	case reflect.Bool:
		fmt.Fprint(b, v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		fmt.Fprint(b, v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		fmt.Fprint(b, v.Uint())
	case reflect.Float32, reflect.Float64:
		fmt.Fprint(b, v.Float())
	case reflect.Complex64, reflect.Complex128:
		fmt.Fprint(b, v.Complex())
	default:
		fmt.Fprintf(b, "?%s", v.Kind())
	}
}

var (
	mutexType   = reflect.TypeFor[sync.Mutex]()
	rwMutexType = reflect.TypeFor[sync.RWMutex]()
)

// lockFields takes every lock struct v holds as a field (all or none, so
// that taking them in field order can never deadlock with code that takes
// them in another) and returns what releases them. A struct that is not
// addressable is a copy nobody else writes.
func lockFields(v reflect.Value) (unlock func()) {
	if !v.CanAddr() {
		return func() {}
	}
	type lock struct{ try, release func() bool }
	var locks []lock
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Type() {
		case mutexType:
			m := (*sync.Mutex)(unsafe.Pointer(f.UnsafeAddr()))
			locks = append(locks, lock{m.TryLock, func() bool { m.Unlock(); return true }})
		case rwMutexType:
			m := (*sync.RWMutex)(unsafe.Pointer(f.UnsafeAddr()))
			locks = append(locks, lock{m.TryRLock, func() bool { m.RUnlock(); return true }})
		}
	}
	if len(locks) == 0 {
		return func() {}
	}
	release := func(n int) {
		for _, l := range locks[:n] {
			l.release()
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := 0
		for n < len(locks) && locks[n].try() {
			n++
		}
		if n == len(locks) {
			return func() { release(n) }
		}
		release(n)
		if time.Now().After(deadline) {
			panic(fmt.Sprintf("the locks of a %s stayed taken for 30s", v.Type()))
		}
		runtime.Gosched() // a goroutine holds one: let it finish and retry
	}
}

func modelState(m *Model) string {
	var b strings.Builder
	fingerprint(&b, reflect.ValueOf(m), map[uintptr]bool{}, 0)
	return b.String()
}

// TestViewChangesNothing: View is pure. In every scene — panes of
// running and finished tasks, a scrolled and searched pane, terminals
// (one with the keys, one whose program ended while it had them), the
// help, a gathered view, a long command line, a narrow screen — calling
// View twice changes no model state, sends no remote resize, and draws
// the same screen both times.
func TestViewChangesNothing(t *testing.T) {
	scenes := []struct {
		name string
		w, h int
		do   func(e *testEnv, f *fakeTerms)
	}{
		{"welcome", 80, 24, func(e *testEnv, f *fakeTerms) {}},
		{"tasks", 120, 40, func(e *testEnv, f *fakeTerms) {
			e.submit("/target web")
			e.submit("echo hello")
			e.submit("/run web1,db1 -- fail")
			e.submit("/run web2 -- sleep")
			e.submit("/run local -- seq 300")
			e.press("pgup")
			e.typeText(strings.Repeat("a long command line ", 20))
		}},
		{"search", 100, 30, func(e *testEnv, f *fakeTerms) {
			e.submit("seq 100")
			e.press("ctrl+f")
			e.typeText("7")
		}},
		{"gathered", 120, 40, func(e *testEnv, f *fakeTerms) {
			e.submit("/run web -- echo same")
			e.press("ctrl+g")
		}},
		{"help", 80, 24, func(e *testEnv, f *fakeTerms) {
			e.press("f1", "pgdown", "pgdown", "pgdown", "pgdown", "pgdown", "pgdown", "pgdown")
		}},
		{"terminals", 120, 40, func(e *testEnv, f *fakeTerms) {
			panes := e.attach("/attach web1,web2")
			f.term(e.t, "web1", 0).print(prompt("web1") + "vi\r\n")
			f.term(e.t, "web2", 0).print(prompt("web2"))
			// web1 ends while it has the keys: only the next frame, in
			// Update, takes them back.
			e.submit("/focus 1")
			f.term(e.t, "web1", 0).end(nil, fmt.Errorf("connection reset"))
			deadline := time.Now().Add(5 * time.Second)
			for panes[0].phase() == termLive && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		}},
		{"narrow", 60, 12, func(e *testEnv, f *fakeTerms) {
			e.submit("/run web -- hostname")
		}},
		{"dialogs", 80, 24, func(e *testEnv, f *fakeTerms) {
			e.submit("/target web")
			e.submit("echo one")
			e.submit("/run web1 -- sleep")
			e.press("f3", "down")
			e.press("ctrl+q")
		}},
	}
	for _, sc := range scenes {
		t.Run(sc.name, func(t *testing.T) {
			e := newEnv(t, sc.w, sc.h, true)
			f := e.withTerms()
			sc.do(e, f)
			resizes := func() int {
				n := 0
				for _, ts := range f.terms {
					for _, ft := range ts {
						n += len(ft.resized())
					}
				}
				return n
			}
			before, sent := modelState(e.m), resizes()
			first := e.m.View()
			second := e.m.View()
			after := modelState(e.m)
			if before != after {
				i := 0
				for i < len(before) && i < len(after) && before[i] == after[i] {
					i++
				}
				t.Fatalf("View changed the model's state; first difference at %d:\nbefore …%s…\nafter  …%s…",
					i, before[max(0, i-300):min(len(before), i+200)], after[max(0, i-300):min(len(after), i+200)])
			}
			if first.Content != second.Content {
				t.Error("two Views of one state drew different screens")
			}
			// View returns no command and this env runs none of
			// Update's, so a resize View caused (a flush of the
			// debounced size) would already be recorded: the fake
			// terminals record resizes as they are called.
			if n := resizes(); n != sent {
				t.Errorf("View sent %d remote resizes", n-sent)
			}
		})
	}
}
