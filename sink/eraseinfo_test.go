package sink

import (
	"bytes"
	"testing"

	"pagepipe/kdumpfmt"
)

// A dump with ERASEINFO holds the text right after the last page's data,
// and its sub header says where; everything before it is the dump
// without ERASEINFO; a split part gets its own range's text.
func TestKdumpEraseinfo(t *testing.T) {
	d := smallPagesDump(3, 20000)
	plain := d.unsplit(t)
	text := []byte("erase jiffies size 8\nerase modules nullify\n")
	var asked []*SplitRange
	d.meta.Eraseinfo = func(r *SplitRange) []byte {
		asked = append(asked, r)
		return text
	}
	withInfo := d.unsplit(t)
	if len(asked) != 1 || asked[0] != nil {
		t.Fatalf("Eraseinfo asked for %v, want the whole dump once", asked)
	}
	if len(withInfo) != len(plain)+len(text) || !bytes.Equal(withInfo[len(plain):], text) {
		t.Fatalf("the text does not follow the page data: %d bytes, %d without it", len(withInfo), len(plain))
	}
	sub, err := kdumpfmt.UnmarshalSubHeader(withInfo[4096:])
	if err != nil {
		t.Fatal(err)
	}
	if sub.OffsetEraseinfo != uint64(len(plain)) || sub.SizeEraseinfo != uint64(len(text)) {
		t.Errorf("sub header: eraseinfo %d bytes at %d, want %d at %d", sub.SizeEraseinfo, sub.OffsetEraseinfo, len(text), len(plain))
	}
	// Only the sub header's eraseinfo fields differ before the text.
	sub.OffsetEraseinfo, sub.SizeEraseinfo = 0, 0
	copy(withInfo[4096:], sub.Marshal())
	if !bytes.Equal(withInfo[:len(plain)], plain) {
		t.Errorf("the dump with ERASEINFO differs from the one without before its text")
	}
}
