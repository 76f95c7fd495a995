package erase

import (
	"testing"

	"pagepipe/internal/fuzzcorpus"
)

// The committed seed corpora of this package's fuzz targets (see package
// fuzzcorpus).
func TestFuzzSeedCorpus(t *testing.T) {
	every := "erase a\nerase b.c size 25\nerase d size 1K\nerase e nullify\nerase f size g.h\n[mod]\nfor x in l via next\nerase x.p\nerase x.k size x.ks\nendfor\nfor y in h.next within s:list\nerase y.q\nendfor\n[vmlinux]\nfor z in arr\nendfor\n"
	seeds := []fuzzcorpus.Seed{
		{Name: "every-form", Args: []any{[]byte(every)}},
		{Name: "comments-tabs", Args: []any{[]byte("# c\n\terase\ta # c\n\n")}},
		{Name: "unclosed-section", Args: []any{[]byte("[mod\nerase a\n")}},
		{Name: "no-endfor", Args: []any{[]byte("for x in y\nerase x.a\n[m]\nendfor\n")}},
		{Name: "empty", Args: []any{[]byte{}}},
	}
	seeds = append(seeds, fuzzcorpus.Truncations("every-form", []byte(every), 7, len(every)/2, len(every)-3)...)
	fuzzcorpus.Check(t, "FuzzParse", seeds)
}
