// Package memprobe says how much memory the process may use: what the
// cyclic bitmaps' budget and the garbage collector's limit are chosen
// from. It reads /proc/meminfo and the process's cgroup (v2).
package memprobe

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Available is the memory the process may still use: MemAvailable of
// /proc/meminfo, or less when its cgroup (v2) sets memory.max.
func Available() (uint64, error) {
	avail, err := meminfo("MemAvailable:")
	if err != nil {
		return 0, err
	}
	if left, ok := cgroupLeft(); ok {
		avail = min(avail, left)
	}
	return avail, nil
}

// cgroupLeft is memory.max less memory.current of the process's cgroup
// v2, when it sets a limit.
func cgroupLeft() (uint64, bool) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		path, ok := strings.CutPrefix(line, "0::")
		if !ok {
			continue
		}
		dir := filepath.Join("/sys/fs/cgroup", path)
		max, err1 := readUint(filepath.Join(dir, "memory.max"))
		cur, err2 := readUint(filepath.Join(dir, "memory.current"))
		if err1 != nil || err2 != nil { // "max": no limit
			return 0, false
		}
		return max - min(cur, max), true
	}
	return 0, false
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// MemFree reads MemFree from /proc/meminfo, in bytes, as makedumpfile's
// get_free_memory_size does.
func MemFree() (uint64, error) { return meminfo("MemFree:") }

// meminfo reads one line of /proc/meminfo, in bytes.
func meminfo(key string) (uint64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		v, ok := bytes.CutPrefix(sc.Bytes(), []byte(key))
		if !ok {
			continue
		}
		n, unit, _ := bytes.Cut(bytes.TrimSpace(v), []byte(" "))
		kb, err := strconv.ParseUint(string(n), 10, 64)
		if err != nil || string(bytes.TrimSpace(unit)) != "kB" {
			return 0, fmt.Errorf("/proc/meminfo: cannot read %q", sc.Text())
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("/proc/meminfo has no %s line", strings.TrimSuffix(key, ":"))
}
