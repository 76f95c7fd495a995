package cpuset

import (
	"reflect"
	"testing"
)

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{[]int{0}, "0"}, {[]int{0, 1, 2, 3}, "0-3"}, {[]int{3, 0, 1, 6}, "0-1,3,6"},
	} {
		if got := Format(tc.in); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	usable := []int{0, 1, 2, 5}
	for _, tc := range []struct {
		spec string
		want []int // nil: an error
	}{
		{"1", []int{0}},
		{"3", []int{0, 1, 2}},
		{"0-1,5", []int{0, 1, 5}},
		{"2-2", []int{2}},
		{"5", nil},   // more CPUs than usable
		{"0", nil},   // no CPU
		{"3-4", nil}, // CPU 3 not usable
		{"2-1", nil},
		{"x", nil},
	} {
		got, err := Parse(tc.spec, usable)
		if (err != nil) != (tc.want == nil) || (tc.want != nil && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("%q: %v, %v; want %v", tc.spec, got, err, tc.want)
		}
	}
}
