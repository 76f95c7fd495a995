package kernel

import (
	"fmt"
	"testing"
)

func TestParseVersion(t *testing.T) {
	for s, want := range map[string]string{"6.1.0-57-amd64": "{6 1 0}", "5.14": "{5 14 0}", "4.19.316": "{4 19 316}"} {
		v, err := ParseVersion(s)
		if err != nil || fmt.Sprint(v) != want {
			t.Errorf("%s: %v %v, want %s", s, v, err, want)
		}
	}
	if _, err := ParseVersion("x"); err == nil {
		t.Error("x parsed")
	}
}
