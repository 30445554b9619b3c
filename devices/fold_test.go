package devices

import (
	"sort"
	"strings"
	"testing"
)

func TestFold(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"", ""},
		{"web1", "web1"},
		{"web1,web2,web3,db2", "db2,web[1-3]"},
		{"web3,web1,web2,web2", "web[1-3]"},
		{"h1,h2,h4,h5,h6,h9", "h[1-2,4-6,9]"},
		{"n01,n02,n03", "n[01-03]"},
		{"n08,n09,n10", "n[08-10]"},
		{"local,web1,web10,web2", "local,web[1-2,10]"},
		{"db-a,db-b", "db-a,db-b"},
		{"rack1-node1,rack1-node2,rack2-node1", "rack1-node[1-2],rack2-node1"},
		{"42,43", "42,43"},
		{"user@10.0.0.1:22", "user@10.0.0.1:22"},
		{"web01.example.com,web02.example.com,web03.example.com,bastion.example.com", "bastion.example.com,web[01-03].example.com"},
		{"10.0.0.5,10.0.0.6,10.0.1.5", "10.0.0.[5-6],10.0.1.5"},
		{"rack1-a,rack2-a,rack3-b", "rack[1-2]-a,rack3-b"},
		{"1a,2a", "[1-2]a"},
	}
	for _, tt := range tests {
		var in []string
		if tt.in != "" {
			in = strings.Split(tt.in, ",")
		}
		if got := Fold(in); got != tt.want {
			t.Errorf("Fold(%s) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzFold: what Fold writes expands back to exactly the names it was
// given.
func FuzzFold(f *testing.F) {
	f.Add("web1,web2,web3,db2")
	f.Add("n01,n02,n10,n9")
	f.Add("a,a1,a01,a001")
	f.Fuzz(func(t *testing.T, list string) {
		seen := map[string]bool{}
		var names []string
		for _, n := range strings.Split(list, ",") {
			// Names as the registry allows them: no brackets or commas.
			if n == "" || strings.TrimSpace(n) != n || strings.ContainsAny(n, "[]{},! \t\n^") || seen[n] {
				continue
			}
			seen[n] = true
			names = append(names, n)
		}
		folded := Fold(names)
		var back []string
		if folded != "" {
			items, err := splitTargets(folded)
			if err != nil {
				t.Fatalf("Fold(%q) = %q does not split: %v", names, folded, err)
			}
			for _, it := range items {
				exp, err := expandRanges(it, 1<<20)
				if err != nil {
					t.Fatalf("Fold(%q) = %q does not expand: %v", names, folded, err)
				}
				back = append(back, exp...)
			}
		}
		sort.Strings(names)
		sort.Strings(back)
		if strings.Join(names, "\n") != strings.Join(back, "\n") {
			t.Fatalf("Fold(%q) = %q expands to %q", names, folded, back)
		}
	})
}
